"""Dependencies shared by the routers, as ``Annotated`` aliases."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from runtime.context import CallContext
from runtime.egress.rules import HEADER_PATTERN
from runtime.errors import MissingContext, Unauthorized
from runtime.services import Services


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


# Declares the bearer scheme in OpenAPI; the check (and its error body) is ours.
bearer = HTTPBearer(auto_error=False, description="The agent backend's API token")


def require_token(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    configured = services.settings.api_token
    if configured is None:  # serve refuses to start so; this guards other embeddings
        msg = "this service has no API token configured"
        raise Unauthorized(msg)
    expected = configured.get_secret_value()
    token = credentials.credentials if credentials else ""
    if not hmac.compare_digest(token.encode(), expected.encode()):
        msg = "a valid bearer token is required (Authorization: Bearer <token>)"
        raise Unauthorized(msg)


def call_context(
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
            pattern=HEADER_PATTERN,
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
    )


def _host_list(header: str | None) -> tuple[str, ...] | None:
    if header is None:
        return None
    return tuple(part.strip() for part in header.split(",") if part.strip())


ContextDep = Annotated[CallContext, Depends(call_context)]
Authenticated = [Depends(require_token)]
