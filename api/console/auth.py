"""Console sign-in: the session's cookie, and the checks on changes.

Signing in with an admin token opens a console session
(``runtime/admin/console_sessions.py``): its random id goes to the browser in the
``siesta_console`` cookie (HttpOnly, SameSite=Strict, Path=/console, Secure over
https). Each request looks the session up by the cookie.

A change (every POST) needs the cookie, the session's CSRF token in the form's
``csrf`` field (compared in constant time) and, when the browser names an
``Origin``, this host as its origin.
"""

from __future__ import annotations

import hmac
from typing import Annotated
from urllib.parse import urlsplit

from anyio import to_thread
from fastapi import Depends, Request, Response

from api.console.routing import PREFIX, CsrfFailed, SignedOut, SignInFirst
from api.deps import get_services
from runtime.core.operator_records import ConsoleSession

COOKIE = "siesta_console"


def set_cookie(response: Response, request: Request, session_id: str, max_age: float) -> None:
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=int(max_age),
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        COOKIE,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def source_of(request: Request) -> str:
    """The client's address (what the audit trail records as where from)."""
    return request.client.host if request.client else "unknown"


def check_origin(request: Request) -> None:
    """A browser's ``Origin`` (when it sends one) must be this host: a form another
    site posts here is refused even if the browser sent the cookie."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    host = request.headers.get("host", "")
    if origin == "null" or urlsplit(origin).netloc.lower() != host.lower():
        msg = f"the request came from another origin ({origin}) than this console ({host})"
        raise CsrfFailed(msg)


async def page_session(request: Request) -> ConsoleSession:
    """A page's session; without one, the browser is sent to the sign-in form."""
    services = get_services(request)
    cookie = request.cookies.get(COOKIE)
    session = await to_thread.run_sync(services.console_sessions.live, cookie)
    if session is None:
        msg = "sign in first"
        raise SignInFirst(msg)
    return session


async def action_session(request: Request) -> ConsoleSession:
    """A change's session: the cookie (else 401), then the CSRF token and origin (else 403)."""
    services = get_services(request)
    cookie = request.cookies.get(COOKIE)
    session = await to_thread.run_sync(services.console_sessions.live, cookie)
    if session is None:
        msg = "this change needs a console session: sign in first"
        raise SignedOut(msg)
    check_origin(request)
    sent = (await request.form()).get("csrf")
    if not isinstance(sent, str) or not sent:
        msg = "the form did not send the session's CSRF token"
        raise CsrfFailed(msg)
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        msg = "the form's CSRF token is not this session's"
        raise CsrfFailed(msg)
    return session


PageSession = Annotated[ConsoleSession, Depends(page_session)]
ActionSession = Annotated[ConsoleSession, Depends(action_session)]
