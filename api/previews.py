"""Previews in a browser: port P of a conversation at ``P-LABEL.PREVIEW_DOMAIN``
(``SIESTA_PORTS__PREVIEW_DOMAIN``), each conversation and port an origin of its own,
apart from the API's and the console's.

LABEL is the conversation's (``PortTokens.label``: derived from org and conversation
with the deployment's secret, so a page cannot name another conversation's host). The
request carries the conversation's preview token (``GET .../sandbox/ports/{port}``
answers its ``previewUrl``) as ``X-Siesta-Port-Token``, as ``?token=`` (a GET or HEAD
is then sent to the same address without it, with an HttpOnly cookie for this host
only, so the token leaves the address bar and the ``Referer``), or as that cookie. The
server's answer passes as it came, cookies included: they are its own host's.

Any other name under the preview domain is 404 ``preview_host_unknown``: no host there
ever reaches the API or the console.
"""

from __future__ import annotations

import hmac

from anyio import to_thread
from starlette.requests import HTTPConnection, Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from siesta_contract.ports import PORT_TOKEN_HEADER

from api.errors import error_response, refuse_websocket, status_for
from api.ports import PortTarget, cookie_for, http_response, websocket_session
from api.routes.ports import PORTS_USER, without_token
from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.sandbox.ports.errors import PortTokenRefused, PreviewHostUnknown
from runtime.sandbox.ports.tokens import LABEL, PortGrant
from runtime.services import Services
from runtime.settings import under


def host_name(scope: Scope) -> str:
    """The ``Host`` header's name, without its port, lowercase."""
    host: str = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
    return host.rsplit(":", 1)[0] if not host.endswith("]") else host


def port_and_label(host: str, domain: str) -> tuple[int, str] | None:
    """What a preview host names, when it is one."""
    first, _, rest = host.partition(".")
    port, _, label = first.partition("-")
    if rest != domain.lower() or not port.isdigit() or len(port) > 5 or not LABEL.fullmatch(label):
        return None
    return (int(port), label) if 1 <= int(port) <= 65535 else None


class PreviewHosts:
    """ASGI middleware: requests to a name under the preview domain never go further."""

    def __init__(self, app: ASGIApp, domain: str | None) -> None:
        self.app = app
        self.domain = domain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.domain is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = host_name(scope)
        if not under(host, self.domain):
            await self.app(scope, receive, send)
            return
        services: Services = scope["app"].state.services
        if scope["type"] == "websocket":
            websocket = WebSocket(scope, receive, send)
            try:
                target = await _target(services, websocket, port_and_label(host, self.domain))
            except SiestaError as error:
                await refuse_websocket(websocket, error)
                return
            await websocket_session(services, target, websocket)
            return
        request = Request(scope, receive)
        try:
            target = await _target(services, request, port_and_label(host, self.domain))
            response = await _answer(services, target, request)
        except SiestaError as error:
            response = error_response(status_for(error), error.to_dict())
        await response(scope, receive, send)


async def _answer(services: Services, target: PortTarget, request: Request) -> Response:
    if target.set_cookie is not None and request.method in ("GET", "HEAD"):
        raw_path: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
        query = without_token(request.scope.get("query_string", b""))
        moved = RedirectResponse((raw_path + (b"?" + query if query else b"")).decode("latin-1"))
        moved.headers.append("set-cookie", target.set_cookie)
        moved.headers["cache-control"] = "no-store"
        return moved
    return await http_response(services, target, request)


async def _target(
    services: Services, connection: HTTPConnection, named: tuple[int, str] | None
) -> PortTarget:
    if named is None:
        msg = "no preview answers at this name: ask GET .../sandbox/ports/{port} for its previewUrl"
        raise PreviewHostUnknown(msg)
    port, label = named
    cookie_name = services.settings.ports.token_cookie
    query: bytes = connection.scope.get("query_string", b"")
    from_query = connection.query_params.get("token")
    token = connection.headers.get(PORT_TOKEN_HEADER) or from_query
    token = token or connection.cookies.get(cookie_name)
    if token is None:
        msg = f"a preview token is required ({PORT_TOKEN_HEADER}, ?token= or its cookie)"
        raise PortTokenRefused(msg)
    ctx = await to_thread.run_sync(_token_context, services, token, label)
    set_cookie = None
    if from_query is not None:
        query = without_token(query)
        secure = connection.url.scheme in ("https", "wss")
        set_cookie = cookie_for(cookie_name, from_query, "/", secure)
    raw_path: bytes = connection.scope.get("raw_path") or connection.scope["path"].encode()
    target = raw_path + (b"?" + query if query else b"")
    return PortTarget(ctx, port, target, "", set_cookie, cookie_name)


def _token_context(services: Services, token: str, label: str) -> CallContext:
    refused = PortTokenRefused(
        "the preview token is not valid for this host (wrong, another conversation's, or "
        "its sandbox was deleted or made afresh: ask GET .../sandbox/ports/{port} again)"
    )
    tokens = services.port_tokens
    named = tokens.named_by_preview(token)
    if named is None:
        raise refused
    org, conversation = named
    if not hmac.compare_digest(tokens.label(org, conversation), label):
        raise refused
    try:
        probe = CallContext(org=org, user=PORTS_USER, conversation=conversation)
    except SiestaError:
        raise refused from None
    record = services.sessions.describe(probe)
    if record is None or not tokens.verify(token, PortGrant(org, conversation, record.session_id)):
        raise refused
    return CallContext(org=org, user=record.user or PORTS_USER, conversation=conversation)
