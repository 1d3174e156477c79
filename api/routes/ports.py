"""A conversation's sandbox ports, through the service.

``GET /v1/conversations/{id}/sandbox/ports/{port}`` (the bearer token, ``sandbox``
scope) answers where the port is reached and a port token for it.
``/v1/conversations/{id}/ports/{port}/{path}`` (every method, and WebSocket) forwards
the request to the port inside the sandbox, over its agent; it takes the port token
alone (as ``X-Siesta-Port-Token`` or ``?token=``), never the bearer token, and is for
API clients: its answers are inert in a browser (``api/path_form.py``); a browser's
preview is the host form (``api/previews.py``). A paused or stopped sandbox is resumed
by the request; traffic never makes a sandbox, nor replaces a retired or lost one (404
``port_sandbox_not_found``). The server sees the query as sent, less ``token``.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qsl, unquote_to_bytes

import anyio
from fastapi import APIRouter, Depends, Header, Path, Request, Response, WebSocket
from starlette.requests import HTTPConnection

from siesta_contract.ports import PORT_TOKEN_HEADER, PortAccessPublic

from api.deps import CallerDep, ContextDep, ServicesDep, requires, through_door
from api.errors import refuse_websocket
from api.ports import PortTarget, http_response, websocket_session
from api.responses import COMMON, error_responses
from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest, SiestaError
from runtime.sandbox.ports.connection import with_sandbox
from runtime.sandbox.ports.errors import PortNotListening, PortTokenRefused
from runtime.sandbox.ports.tokens import PortGrant
from runtime.services import Services

PortNumber = Annotated[int, Path(ge=1, le=65535, description="A TCP port in the sandbox")]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
PORTS_USER = "ports"
"""The user a request through a port token acts as when the session names none."""

access = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox/ports",
    tags=["ports"],
    dependencies=requires("sandbox"),
    responses=error_responses(*COMMON, 404, 409, 504),
)
router = APIRouter(prefix="/v1/conversations/{conversation_id}/ports", tags=["ports"])


def prefix_of(conversation_id: str, port: int) -> str:
    return f"/v1/conversations/{conversation_id}/ports/{port}"


@access.get("/{port}", response_model=PortAccessPublic)
async def port_access(
    request: Request, services: ServicesDep, ctx: ContextDep, port: PortNumber, caller: CallerDep
) -> PortAccessPublic:
    """Where the port answers through this service, with a token for browsers
    (``openPort`` at the door: a policy may hold or close it)."""
    shown = {"port": port}
    await anyio.to_thread.run_sync(lambda: _at_door(services, ctx, caller.name, shown))
    with_sandbox(await anyio.to_thread.run_sync(services.sessions.describe, ctx), port)
    try:
        connection = await services.ports.open(ctx, port)
        await connection.aclose()
        listening = True
    except PortNotListening:
        listening = False
    # Made after the probe: the token is for the session the sandbox has now.
    record = with_sandbox(await anyio.to_thread.run_sync(services.sessions.describe, ctx), port)
    grant = PortGrant(ctx.org, ctx.conversation, record.session_id)
    token = services.port_tokens.issue(grant)
    path = prefix_of(ctx.conversation, port) + "/"
    base = str(request.base_url).rstrip("/")
    return PortAccessPublic(
        port=port,
        path=path,
        url=f"{base}{path}?token={token}",
        token=token,
        listening=listening,
        previewUrl=_preview_url(services, request, grant, port),
    )


def _preview_url(services: Services, request: Request, grant: PortGrant, port: int) -> str | None:
    """The host form's address, on the scheme and port this request came by."""
    domain = services.settings.ports.preview_domain
    if domain is None:
        return None
    tokens = services.port_tokens
    host = f"{port}-{tokens.label(grant.org, grant.conversation)}.{domain}"
    listening = f":{request.url.port}" if request.url.port else ""
    return f"{request.url.scheme}://{host}{listening}/?token={tokens.issue_preview(grant)}"


def _at_door(
    services: Services, ctx: CallContext, requested_by: str, shown: dict[str, int]
) -> None:
    with through_door(services, ctx, requested_by, "openPort", shown):
        pass


def _documented_headers(
    x_siesta_port_token: Annotated[
        str | None,
        Header(
            description="The port token (GET .../sandbox/ports/{port} gives it); or "
            "`?token=`. Without one: 401"
        ),
    ] = None,
) -> None:
    """The header the document states; ``_target`` reads it (or the query, or the cookie)."""


async def port_request(
    request: Request, services: ServicesDep, conversation_id: str, port: PortNumber, path: str
) -> Any:
    """The request, forwarded to ``port`` in the sandbox (the path after the port)."""
    target = await _target(services, request, conversation_id, port)
    return await http_response(services, target, request)


for _method in METHODS:  # one operation per method: each has its own id in the document
    router.add_api_route(
        "/{port}/{path:path}",
        port_request,
        methods=[_method],
        operation_id=f"port_request_{_method.lower()}",
        summary=f"{_method} to a port of the sandbox",
        dependencies=[Depends(_documented_headers)],
        response_class=Response,
        responses={
            200: {
                "description": "Whatever the server on the port answers (any status)",
                "content": {"*/*": {}},
            },
            **error_responses(400, 401, 403, 404, 413, 422, 500, 502, 503, 504),
        },
    )


@router.websocket("/{port}/{path:path}")
async def port_websocket(websocket: WebSocket, conversation_id: str, port: int, path: str) -> None:
    services: Services = websocket.app.state.services
    try:
        if not 1 <= port <= 65535:
            msg = f"port must be 1 to 65535, not {port}"
            raise InvalidRequest(msg, port=port)
        target = await _target(services, websocket, conversation_id, port)
    except SiestaError as error:
        await refuse_websocket(websocket, error)
        return
    await websocket_session(services, target, websocket)


async def _target(
    services: Services, connection: HTTPConnection, conversation_id: str, port: int
) -> PortTarget:
    """Who asks (the port token's org) and what to send. The bearer token opens no port:
    the path is a browser's, and the service's token must never be needed there."""
    prefix = prefix_of(conversation_id, port)
    raw_path: bytes = connection.scope.get("raw_path") or connection.scope["path"].encode()
    tail = raw_path[len(prefix.encode()) :] or b"/"
    query: bytes = connection.scope.get("query_string", b"")
    token = connection.headers.get(PORT_TOKEN_HEADER)
    parameters = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    from_query = next((value for name, value in parameters if name == "token"), None)
    token = token or from_query
    if token is None:
        msg = (
            f"a port token is required ({PORT_TOKEN_HEADER} or ?token=): "
            "GET .../sandbox/ports/{port} with the bearer token gives one"
        )
        raise PortTokenRefused(msg)
    ctx = await anyio.to_thread.run_sync(_token_context, services, token, conversation_id)
    if from_query is not None:
        query = without_token(query)
    target = tail + (b"?" + query if query else b"")
    # No cookie on this origin (the console's): a browser's preview is the host form's.
    # One an older version set is still kept from the server.
    return PortTarget(ctx, port, target, prefix, cookie_name=services.settings.ports.token_cookie)


def without_token(query: bytes) -> bytes:
    """``query`` without its ``token`` parameters, the rest byte for byte (``?flag``
    stays bare, ``%20`` stays ``%20``): the server sees what the client sent."""
    kept = [
        part
        for part in query.split(b"&")
        if unquote_to_bytes(part.split(b"=", 1)[0].replace(b"+", b" ")) != b"token"
    ]
    return b"&".join(kept)


def _token_context(services: Services, token: str, conversation_id: str) -> CallContext:
    refused = PortTokenRefused(
        "the port token is not valid for this conversation (wrong, or its sandbox was "
        "deleted or made afresh: ask GET .../sandbox/ports/{port} again)"
    )
    org = services.port_tokens.org_of(token)
    if org is None:
        raise refused
    try:
        probe = CallContext(org=org, user=PORTS_USER, conversation=conversation_id)
    except SiestaError:
        raise refused from None
    record = services.sessions.describe(probe)
    if record is None or not services.port_tokens.verify(
        token, PortGrant(org, conversation_id, record.session_id)
    ):
        raise refused
    return CallContext(org=org, user=record.user or PORTS_USER, conversation=conversation_id)
