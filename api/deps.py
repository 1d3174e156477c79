"""Dependencies shared by the routers, as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from siesta_contract.text import EGRESS_HEADER, ID_MAX_CHARS, ID_PATTERN

from api.idempotency import RETRY_STATE
from runtime.core import logs
from runtime.core.auth import Caller
from runtime.core.context import CallContext, RetryKey
from runtime.core.errors import ForbiddenScope, MissingContext, Unauthorized
from runtime.core.records import ToolExecution
from runtime.core.settings import Scope
from runtime.services import Services
from runtime.tools.door import door_call


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


# Declares the bearer scheme in OpenAPI; the check (and its error body) is ours.
bearer = HTTPBearer(auto_error=False, description="A token the deployment configured")


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The caller whose token this is (401 when none is). ``async`` so that the
    caller's name set for the logs reaches the handler's context."""
    services: Services = request.app.state.services
    return _identify(services, credentials.credentials if credentials else "")


def _identify(services: Services, token: str) -> Caller:
    if not services.tokens:  # serve refuses to start so; this guards other embeddings
        msg = "this service has no API token configured"
        raise Unauthorized(msg)
    caller = services.tokens.identify(token)
    if caller is None:
        msg = "a valid bearer token is required (Authorization: Bearer <token>)"
        raise Unauthorized(msg)
    logs.CALLER.set(caller.name)
    return caller


CallerDep = Annotated[Caller, Depends(authenticate)]


def requires(scope: Scope) -> list[Any]:
    """Router dependencies: a valid token that has ``scope`` (else 403 naming it)."""

    async def check(caller: CallerDep) -> None:
        _check_scope(caller, scope)

    return [Depends(check)]


def _check_scope(caller: Caller, scope: Scope) -> None:
    if not caller.may(scope):
        msg = f"this route needs a token with the {scope!r} scope; {caller.name!r} lacks it"
        raise ForbiddenScope(msg, scope=scope, token=caller.name)


def call_context(
    request: Request,
    conversation_id: Annotated[str, Path()],
    caller: CallerDep,
    x_siesta_org: Annotated[str | None, Header()] = None,
    x_siesta_user: Annotated[str | None, Header()] = None,
    x_siesta_agent: Annotated[str | None, Header()] = None,
    x_siesta_base_image: Annotated[str | None, Header()] = None,
    x_siesta_egress_allow: Annotated[
        str | None,
        Header(
            description="The agent's narrowing of the deployment's egress allowlist: "
            "comma-separated host names (an empty value: no network at all)",
            pattern=EGRESS_HEADER,
        ),
    ] = None,
    x_siesta_sub_agents: Annotated[
        str | None,
        Header(
            description="The agent's configured sub-agents, comma-separated: the only ones "
            "a script's callAgent / callAgentsParallel may call (absent: none)"
        ),
    ] = None,
    x_siesta_message_id: Annotated[
        str | None,
        Header(
            description="The assistant message this call belongs to: the files it "
            "publishes (publishFiles, image_generation, a script's artifacts) are attached "
            "to it",
            pattern=ID_PATTERN,
            max_length=ID_MAX_CHARS,
        ),
    ] = None,
) -> CallContext:
    ctx = _context(
        conversation_id,
        caller,
        {
            "x-siesta-org": x_siesta_org,
            "x-siesta-user": x_siesta_user,
            "x-siesta-agent": x_siesta_agent,
            "x-siesta-base-image": x_siesta_base_image,
            "x-siesta-egress-allow": x_siesta_egress_allow,
            "x-siesta-sub-agents": x_siesta_sub_agents,
            "x-siesta-message-id": x_siesta_message_id,
        },
        retry=request.scope.get("state", {}).get(RETRY_STATE),
    )
    return get_services(request).agents.bind(ctx)  # a registered agent's configuration


def _context(
    conversation_id: str,
    caller: Caller,
    headers: Mapping[str, str | None],
    retry: RetryKey | None = None,
) -> CallContext:
    """The call's context, its org and user as the caller's token allows them (a bound
    token's own when the header is absent; 403 when it names another)."""
    named_org = headers.get("x-siesta-org")
    org = caller.org_for(named_org) if named_org or caller.org else None
    user = caller.user_for(headers.get("x-siesta-user"))
    missing = [
        name for name, value in (("X-Siesta-Org", org), ("X-Siesta-User", user)) if not value
    ]
    if missing:
        msg = f"conversation routes need the {' and '.join(missing)} header(s)"
        raise MissingContext(msg, headers=missing)
    assert org is not None and user is not None
    return CallContext(
        org=org,
        user=user,
        conversation=conversation_id,
        agent=headers.get("x-siesta-agent") or None,
        base_image=headers.get("x-siesta-base-image") or None,
        egress_allow=_host_list(headers.get("x-siesta-egress-allow")),
        sub_agents=_host_list(headers.get("x-siesta-sub-agents")) or (),
        retry=retry,
        message=headers.get("x-siesta-message-id") or None,
    )


def websocket_context(
    websocket: WebSocket, conversation_id: str, scope: Scope
) -> tuple[Caller, CallContext]:
    """A WebSocket route's caller and context, checked as ``requires(scope)`` and
    ``ContextDep`` check an HTTP route's: the same bearer token and context headers."""
    services: Services = websocket.app.state.services
    scheme, _, token = websocket.headers.get("authorization", "").partition(" ")
    caller = _identify(services, token.strip() if scheme.lower() == "bearer" else "")
    _check_scope(caller, scope)
    return caller, services.agents.bind(_context(conversation_id, caller, websocket.headers))


def _host_list(header: str | None) -> tuple[str, ...] | None:
    """A comma-separated header's items (``None`` when the header is absent)."""
    if header is None:
        return None
    return tuple(part.strip() for part in header.split(",") if part.strip())


ContextDep = Annotated[CallContext, Depends(call_context)]


def conversation_context(
    conversation_id: Annotated[str, Path()],
    caller: CallerDep,
    x_siesta_org: Annotated[str | None, Header()] = None,
    x_siesta_user: Annotated[str | None, Header()] = None,
) -> CallContext:
    """The conversation alone, for routes about the conversation rather than a call
    of its agent (no agent, image, egress or sub-agent headers: they would not apply)."""
    headers = {"x-siesta-org": x_siesta_org, "x-siesta-user": x_siesta_user}
    return _context(conversation_id, caller, headers)


def org_context(
    caller: CallerDep,
    x_siesta_org: Annotated[
        str | None,
        Header(description="The org the call acts in (a token bound to one org: that org)"),
    ] = None,
) -> str:
    """The org of a route about the org's things (agents, banks, approvals, the log),
    as the caller's token allows it."""
    return caller.org_for(x_siesta_org)


OrgDep = Annotated[str, Depends(org_context)]


def every_org(what: str) -> list[Any]:
    """Router dependencies of a deployment-wide route: refused to a bound token."""

    async def check(caller: CallerDep) -> None:
        caller.every_org(what)

    return [Depends(check)]


ConversationDep = Annotated[CallContext, Depends(conversation_context)]


def through_door(
    services: Services,
    ctx: CallContext,
    requested_by: str,
    function: str,
    arguments: Mapping[str, Any],
    content: bytes = b"",
) -> AbstractContextManager[ToolExecution]:
    """A programmatic face's call at the door (``runtime/tools/door.py``): policy and log."""
    return services.tools.through_door(ctx, door_call(function, arguments, content), requested_by)


Authenticated = [Depends(authenticate)]
"""Any valid token, whatever its scopes."""
