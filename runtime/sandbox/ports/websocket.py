"""A WebSocket to a server in a sandbox, over a ``PortConnection``, with wsproto as the
client: the upgrade, then whole messages both ways. Pings from the server are
answered here; the client's socket (the service's side) is the caller's."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from runtime.sandbox.ports.connection import PortConnection
from runtime.sandbox.ports.errors import PortConnectionLost, PortMessageTooLarge

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Refused:
    """The server answered the upgrade with an HTTP response."""

    status: int
    headers: Headers
    body: bytes


@dataclass(frozen=True)
class Closed:
    code: int
    reason: str


class ServerSocket:
    """The sandbox's end of a relayed WebSocket."""

    def __init__(self, connection: PortConnection, max_message_bytes: int) -> None:
        self.connection = connection
        self._max_message_bytes = max_message_bytes
        self._message_bytes = 0
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._events: list[Event] = []
        self._text: list[str] = []
        self._bytes: list[bytes] = []
        self.subprotocol: str | None = None

    async def upgrade(
        self, host: str, target: str, subprotocols: list[str], headers: Headers
    ) -> Refused | None:
        """Ask the server for the upgrade: ``None`` when it accepted, else its answer."""
        request = Request(
            host=host, target=target, subprotocols=subprotocols, extra_headers=headers
        )
        await self._send(self._ws.send(request))
        while True:
            event = await self._next()
            if isinstance(event, AcceptConnection):
                self.subprotocol = event.subprotocol
                return None
            if isinstance(event, RejectConnection):
                body = b""
                while event.has_body:
                    data = await self._next()
                    if not isinstance(data, RejectData):
                        break
                    body += data.data
                    self._count(len(data.data), "refusal body")
                    if data.body_finished:
                        break
                return Refused(event.status_code, list(event.headers), body)

    async def send(self, data: str | bytes) -> None:
        message = TextMessage(data=data) if isinstance(data, str) else BytesMessage(data=data)
        await self._send(self._ws.send(message))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        with contextlib.suppress(LocalProtocolError):  # closed already
            await self._send(self._ws.send(CloseConnection(code=code, reason=reason)))
        await self.connection.send_eof()

    async def receive(self) -> str | bytes | Closed:
        """The server's next whole message, or how it closed."""
        while True:
            event = await self._next()
            if isinstance(event, TextMessage):
                self._text.append(event.data)
                self._count(len(event.data.encode()), "message")
                if event.message_finished:
                    text, self._text, self._message_bytes = "".join(self._text), [], 0
                    return text
            elif isinstance(event, BytesMessage):
                self._bytes.append(bytes(event.data))
                self._count(len(event.data), "message")
                if event.message_finished:
                    data, self._bytes, self._message_bytes = b"".join(self._bytes), [], 0
                    return data
            elif isinstance(event, Ping):
                await self._send(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                with contextlib.suppress(LocalProtocolError):  # ended without a close frame
                    await self._send(self._ws.send(event.response()))
                return Closed(event.code, event.reason or "")

    def _count(self, size: int, what: str) -> None:
        """A message is held whole before it is relayed: bounded, as the server in the
        sandbox decides how long it is."""
        self._message_bytes += size
        limit = self._max_message_bytes
        if self._message_bytes > limit:
            port = self.connection.port
            msg = (
                f"port {port} sent a WebSocket {what} over {limit} bytes, the limit "
                "(SIESTA_PORTS__MAX_WEBSOCKET_MESSAGE_BYTES)"
            )
            raise PortMessageTooLarge(msg, port=port, limit=limit)

    async def _next(self) -> Event:
        while not self._events:
            data = await self.connection.receive()
            try:
                self._ws.receive_data(data or None)
                self._events.extend(self._ws.events())
            except RemoteProtocolError as exc:
                msg = f"port {self.connection.port} broke the WebSocket protocol: {exc}"
                raise PortConnectionLost(msg, port=self.connection.port) from exc
            if not data and not self._events:
                return CloseConnection(code=1006, reason="the server closed the connection")
        return self._events.pop(0)

    async def _send(self, data: bytes) -> None:
        await self.connection.send(data)
