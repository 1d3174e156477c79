"""Requests to a sandbox's port, forwarded: the ASGI side of ``runtime.sandbox.ports``,
shared by the path form (``api/routes/ports.py``, made inert by ``api/path_form.py``),
the previews' host form (``api/previews.py``) and E2B's (``api/e2b/hosts.py``). What
only the service reads (its tokens, the ``X-Siesta-*`` context) never reaches the
sandbox; the server there sees ``Host: localhost:PORT`` and the client's host, scheme,
address and path prefix as ``X-Forwarded-*``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.cookies import SimpleCookie

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from api.errors import REFUSED_UPGRADE_HEADERS, refuse_websocket
from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.sandbox.ports.connection import PortConnection
from runtime.sandbox.ports.errors import PortMessageTooLarge
from runtime.sandbox.ports.http1 import ForwardedRequest, end_to_end, forward
from runtime.sandbox.ports.websocket import Closed, ServerSocket
from runtime.services import Services

SERVICE_ONLY = frozenset({b"authorization", b"e2b-traffic-access-token", b"host"})
"""Besides ``X-Siesta-*``: what the service reads and the sandbox never sees."""
WEBSOCKET_OWN = frozenset(
    {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-protocol"}
)
"""Handshake headers wsproto writes itself on the sandbox's side."""
Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class PortTarget:
    """Where a request goes: a port of a conversation's sandbox, and how to ask it."""

    ctx: CallContext
    port: int
    target: bytes
    """Path and query for the server in the sandbox."""
    prefix: str = ""
    """The path before ``target`` on this service (``X-Forwarded-Prefix``)."""
    set_cookie: str | None = None
    """A ``Set-Cookie`` value for the answer (a preview token that came as ``?token=``)."""
    cookie_name: str | None = None
    """The service's cookie, taken out of the ``Cookie`` header sent on."""
    host: str | None = None
    """The ``Host`` the server sees (E2B's ``maskRequestHost``), else ``localhost:PORT``."""

    @property
    def host_header(self) -> str:
        return self.host or f"localhost:{self.port}"


def forwarded_headers(scope: Scope, target: PortTarget) -> Headers:
    headers = [
        (key, value)
        for key, value in end_to_end(list(scope["headers"]))
        if key not in SERVICE_ONLY and not key.startswith(b"x-siesta-")
    ]
    headers = _without_cookie(headers, target.cookie_name)
    original = dict(scope["headers"]).get(b"host", b"")
    client = scope.get("client")
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", ""), scope.get("scheme", ""))
    headers += [
        (b"host", target.host_header.encode()),
        (b"x-forwarded-host", original),
        (b"x-forwarded-proto", str(scheme or "http").encode()),
    ]
    if client:
        headers.append((b"x-forwarded-for", str(client[0]).encode()))
    if target.prefix:
        headers.append((b"x-forwarded-prefix", target.prefix.encode()))
    return headers


def _without_cookie(headers: Headers, name: str | None) -> Headers:
    if name is None:
        return headers
    kept: Headers = []
    for key, value in headers:
        if key == b"cookie":
            parts = [p for p in value.split(b";") if p.strip().split(b"=")[0] != name.encode()]
            if not any(p.strip() for p in parts):
                continue
            value = b";".join(parts).strip()
        kept.append((key, value))
    return kept


class ForwardedStream(StreamingResponse):
    """The server's answer as it comes; the connection ends with it, however it ends."""

    def __init__(
        self, connection: PortConnection, status: int, headers: Headers, body: AsyncIterator[bytes]
    ) -> None:
        super().__init__(body, status_code=status)
        self.raw_headers = headers
        self._connection = connection

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._connection.aclose()


async def http_response(services: Services, target: PortTarget, request: Request) -> Response:
    """Open the connection, send the request, answer once the server's head came (a
    client that goes away before that ends the connection: a server that never
    answers must not hold it)."""
    headers = forwarded_headers(request.scope, target)
    declared = request.headers.get("content-length")
    length = int(declared) if declared and declared.isdigit() else None
    chunked = "transfer-encoding" in request.headers
    forwarded = ForwardedRequest(
        method=request.method.encode(),
        target=target.target,
        headers=headers,
        has_body=bool(length) or (length is None and chunked),
        length=length,
    )
    sent = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        if forwarded.has_body:
            async for chunk in request.stream():
                yield chunk
        sent.set()

    connection = await services.ports.open(target.ctx, target.port)
    forwarding = asyncio.ensure_future(forward(connection, forwarded, body()))
    gone = asyncio.ensure_future(_client_gone(request, sent))
    try:
        await asyncio.wait({forwarding, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not forwarding.done():
            forwarding.cancel()
            with anyio.CancelScope(shield=True):
                await connection.aclose()
            return Response(status_code=499)  # nobody reads it: the client is gone
        answer = forwarding.result()
    except ClientDisconnect:  # gone mid-upload: the upload's failure ended the forwarding
        with anyio.CancelScope(shield=True):
            await connection.aclose()
        return Response(status_code=499)
    except BaseException:
        forwarding.cancel()
        with anyio.CancelScope(shield=True):
            await connection.aclose()
        raise
    finally:
        gone.cancel()
    answer_headers = list(answer.headers)
    if target.set_cookie is not None:
        answer_headers.append((b"set-cookie", target.set_cookie.encode()))
    return ForwardedStream(connection, answer.status, answer_headers, answer.body)


async def _client_gone(request: Request, sent: asyncio.Event) -> None:
    """Returns when the client disconnects (read only once its body was sent on)."""
    await sent.wait()
    while (await request.receive())["type"] != "http.disconnect":
        pass


def cookie_for(name: str, token: str, path: str, secure: bool) -> str:
    cookie: SimpleCookie = SimpleCookie()
    cookie[name] = token
    morsel = cookie[name]
    morsel["path"] = path
    morsel["httponly"] = True
    morsel["samesite"] = "Lax"
    if secure:
        morsel["secure"] = True
    return morsel.OutputString()


async def websocket_session(services: Services, target: PortTarget, websocket: WebSocket) -> None:
    """Upgrade to the server in the sandbox, then relay messages both ways until one
    side closes. The server's refusal is answered to the client as it came."""
    headers = [
        (k, v) for k, v in forwarded_headers(websocket.scope, target) if k not in WEBSOCKET_OWN
    ]
    headers = [(k, v) for k, v in headers if k != b"host"]
    subprotocols = list(websocket.scope.get("subprotocols") or [])
    try:
        connection = await services.ports.open(target.ctx, target.port)
    except SiestaError as error:
        await refuse_websocket(websocket, error)
        return
    server = ServerSocket(connection, services.settings.ports.max_websocket_message_bytes)
    try:
        refused = await server.upgrade(
            target.host_header, target.target.decode("latin-1"), subprotocols, headers
        )
        if refused is not None:
            if "websocket.http.response" in websocket.scope.get("extensions", {}):
                await websocket.send_denial_response(
                    _Refusal(refused.status, refused.headers, refused.body)
                )
            else:
                await websocket.close(code=1011, reason=f"refused: {refused.status}")
            return
        await websocket.accept(subprotocol=server.subprotocol)
        await _relay(websocket, server)
    except SiestaError as error:
        if websocket.client_state is WebSocketState.CONNECTING:
            await refuse_websocket(websocket, error)
        elif websocket.client_state is WebSocketState.CONNECTED:
            # 1009: "message too big"; the reason names the limit (a close frame's
            # reason is at most 123 bytes).
            code = 1009 if isinstance(error, PortMessageTooLarge) else 1011
            await websocket.close(code=code, reason=str(error)[:120])
    finally:
        with anyio.CancelScope(shield=True):
            await connection.aclose()


class _Refusal(StreamingResponse):
    def __init__(self, status: int, headers: Headers, body: bytes) -> None:
        async def once() -> AsyncIterator[bytes]:
            yield body

        super().__init__(once(), status_code=status)
        self.raw_headers = end_to_end(headers) + [
            (k.lower().encode(), v.encode()) for k, v in REFUSED_UPGRADE_HEADERS.items()
        ]


async def _relay(websocket: WebSocket, server: ServerSocket) -> None:
    to_server = asyncio.create_task(_client_to_server(websocket, server))
    to_client = asyncio.create_task(_server_to_client(websocket, server))
    try:
        await asyncio.wait({to_server, to_client}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_server, to_client):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if to_client.done() and not to_client.cancelled() and to_client.exception() is not None:
        raise to_client.exception()  # type: ignore[misc]


async def _client_to_server(websocket: WebSocket, server: ServerSocket) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            await server.close(message.get("code", 1000) or 1000, message.get("reason") or "")
            return
        text, data = message.get("text"), message.get("bytes")
        await server.send(text if text is not None else data or b"")


async def _server_to_client(websocket: WebSocket, server: ServerSocket) -> None:
    while True:
        message = await server.receive()
        if isinstance(message, Closed):
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await websocket.close(code=_sendable(message.code), reason=message.reason)
            return
        if isinstance(message, str):
            await websocket.send_text(message)
        else:
            await websocket.send_bytes(message)


def _sendable(code: int) -> int:
    """A close code the server gave, as one that may be sent (1005 and 1006 are only
    ever reported: the server sent none, or no close frame at all)."""
    if code == 1005:
        return 1000
    return code if 1000 <= code < 5000 and code not in (1004, 1006, 1015) else 1011
