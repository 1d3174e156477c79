"""Signing in with an admin token, and out."""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console.audit_hook import record_action
from api.console.auth import (
    COOKIE,
    ActionSession,
    check_origin,
    clear_cookie,
    set_cookie,
    source_of,
)
from api.console.render import render
from api.console.routing import PREFIX, SIGN_IN, ConsoleRoute
from api.deps import ServicesDep

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(SIGN_IN)
def sign_in_form(request: Request, services: ServicesDep) -> Response:
    if services.console_sessions.live(request.cookies.get(COOKIE)) is not None:
        return RedirectResponse(PREFIX, 303)
    return render(None, "sign_in.html", message=None)


@router.post(SIGN_IN)
async def sign_in(
    request: Request, services: ServicesDep, token: Annotated[str, Form()] = ""
) -> Response:
    """No session to carry a CSRF token yet: the origin check (and SameSite) guard it."""
    check_origin(request)
    caller = services.console_sessions.admin_caller(token.strip())
    if caller is None:
        return refused_sign_in(services, token.strip())
    source = source_of(request)
    session_id, session = await to_thread.run_sync(
        lambda: services.console_sessions.open(caller, token.strip(), source)
    )
    record_action(services, caller.name, "console.sign_in", "console", source=source)
    response = RedirectResponse(PREFIX, 303)
    set_cookie(response, request, session_id, session.expires_at - session.created_at)
    return response


def refused_sign_in(services: ServicesDep, token: str) -> HTMLResponse:
    known = services.tokens.identify(token) if token else None
    if known is None:
        message = "That is not a token this service knows."
    elif known.bound:
        message = (
            f"The token {known.name!r} is bound to some orgs; the console shows every "
            "org's sandboxes and approvals, so it takes an admin token bound to none."
        )
    else:
        message = f"The token {known.name!r} does not have the admin scope the console needs."
    return render(None, "sign_in.html", status=401, message=message)


@router.post(f"{PREFIX}/sign-out")
def sign_out(request: Request, services: ServicesDep, session: ActionSession) -> Response:
    services.console_sessions.end(session)
    record_action(
        services, session.token_name, "console.sign_out", "console", source=source_of(request)
    )
    response = RedirectResponse(SIGN_IN, 303)
    clear_cookie(response, request)
    return response
