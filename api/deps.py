"""Dependencies shared by the routers, as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from siesta_contract.text import EGRESS_HEADER

from api.idempotency import RETRY_STATE
from runtime.core import logs
from runtime.core.auth import Caller
from runtime.core.context import CallContext
from runtime.core.errors import ForbiddenScope, MissingContext, Unauthorized
from runtime.core.settings import Scope
from runtime.services import Services


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
    if not services.tokens:  # serve refuses to start so; this guards other embeddings
        msg = "this service has no API token configured"
        raise Unauthorized(msg)
    caller = services.tokens.identify(credentials.credentials if credentials else "")
    if caller is None:
        msg = "a valid bearer token is required (Authorization: Bearer <token>)"
        raise Unauthorized(msg)
    logs.CALLER.set(caller.name)
    return caller


CallerDep = Annotated[Caller, Depends(authenticate)]


def requires(scope: Scope) -> list[Any]:
    """Router dependencies: a valid token that has ``scope`` (else 403 naming it)."""

    async def check(caller: CallerDep) -> None:
        if not caller.may(scope):
            msg = f"this route needs a token with the {scope!r} scope; {caller.name!r} lacks it"
            raise ForbiddenScope(msg, scope=scope, token=caller.name)

    return [Depends(check)]


def call_context(
    request: Request,
    conversation_id: Annotated[str, Path()],
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
) -> CallContext:
    missing = [
        name
        for name, value in (("X-Siesta-Org", x_siesta_org), ("X-Siesta-User", x_siesta_user))
        if not value
    ]
    if missing:
        msg = f"conversation routes need the {' and '.join(missing)} header(s)"
        raise MissingContext(msg, headers=missing)
    assert x_siesta_org is not None and x_siesta_user is not None
    return CallContext(
        org=x_siesta_org,
        user=x_siesta_user,
        conversation=conversation_id,
        agent=x_siesta_agent or None,
        base_image=x_siesta_base_image or None,
        egress_allow=_host_list(x_siesta_egress_allow),
        sub_agents=_host_list(x_siesta_sub_agents) or (),
        retry=request.scope.get("state", {}).get(RETRY_STATE),
    )


def _host_list(header: str | None) -> tuple[str, ...] | None:
    """A comma-separated header's items (``None`` when the header is absent)."""
    if header is None:
        return None
    return tuple(part.strip() for part in header.split(",") if part.strip())


ContextDep = Annotated[CallContext, Depends(call_context)]
Authenticated = [Depends(authenticate)]
"""Any valid token, whatever its scopes."""
