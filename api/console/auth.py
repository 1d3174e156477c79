"""Console sign-in: a session kept in the store, its cookie, and the checks on changes.

Signing in with a token that has the ``admin`` scope makes a ``ConsoleSession``: its
random id goes to the browser in the ``siesta_console`` cookie (HttpOnly,
SameSite=Strict, Path=/console, Secure over https) and only its SHA-256 to the store,
so every instance sharing the store knows it and a copy of the store signs nobody in.
Each request looks the session up and checks that its token is still configured (by
the token's digest) with the ``admin`` scope: a token taken out ends its sessions.

A change (every POST) needs the cookie, the session's CSRF token in the form's
``csrf`` field (compared in constant time) and, when the browser names an
``Origin``, this host as its origin.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Annotated
from urllib.parse import urlsplit

from anyio import to_thread
from fastapi import Depends, Request, Response

from api.console.routing import PREFIX, CsrfFailed, SignedOut, SignInFirst
from api.deps import get_services
from runtime.core.auth import Caller, token_digest
from runtime.core.operator_records import ConsoleSession
from runtime.core.settings import Scope
from runtime.services import Services

COOKIE = "siesta_console"
SCOPE: Scope = "admin"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def admin_caller(services: Services, token: str) -> Caller | None:
    """The caller whose token this is, when it has the ``admin`` scope and is bound to
    no org (the console shows and changes every org's sandboxes and approvals)."""
    caller = services.tokens.identify(token) if token else None
    return caller if caller is not None and _console_capable(caller) else None


def _console_capable(caller: Caller) -> bool:
    return caller.may(SCOPE) and not caller.bound


def open_session(
    services: Services,
    caller: Caller,
    token: str,
    source: str,
    clock: Callable[[], float] = time.time,
) -> tuple[str, ConsoleSession]:
    """A new session for ``caller`` (signed in with ``token``): the cookie's id, and
    the record the store keeps under its digest."""
    session_id = secrets.token_urlsafe(32)
    now = clock()
    session = ConsoleSession(
        id_digest=_digest(session_id),
        csrf=secrets.token_urlsafe(32),
        token_name=caller.name,
        token_digest=token_digest(token),
        created_at=now,
        expires_at=now + services.settings.console.session_hours * 3600,
        source=source,
    )
    services.stores.console.put_console_session(session)
    return session_id, session


def live_session(
    services: Services, session_id: str | None, clock: Callable[[], float] = time.time
) -> ConsoleSession | None:
    """The session of this cookie, while it lasts and its token is still an admin's."""
    if not session_id:
        return None
    store = services.stores.console
    session = store.get_console_session(_digest(session_id), clock())
    if session is None:
        return None
    caller = services.tokens.by_digest(session.token_digest)
    if caller is None or caller.name != session.token_name or not _console_capable(caller):
        store.delete_console_session(session.id_digest)
        return None
    return session


def end_session(services: Services, session: ConsoleSession) -> None:
    services.stores.console.delete_console_session(session.id_digest)


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
    session = await to_thread.run_sync(live_session, services, cookie)
    if session is None:
        msg = "sign in first"
        raise SignInFirst(msg)
    return session


async def action_session(request: Request) -> ConsoleSession:
    """A change's session: the cookie (else 401), then the CSRF token and origin (else 403)."""
    services = get_services(request)
    cookie = request.cookies.get(COOKIE)
    session = await to_thread.run_sync(live_session, services, cookie)
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
