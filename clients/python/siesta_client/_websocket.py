"""One terminal WebSocket to one service instance, for ``_terminal.Terminal``.

The handshake is the client's own (over its ``httpx.Client``: ``httpx-ws`` would drop
a refused handshake's error body); then ``httpx-ws``'s session carries the frames,
and a pump thread of ours moves what arrives into a bounded queue, in order, marking
the connection ``cut`` or ``ended`` as it goes by.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import threading
from typing import Any

import httpcore
import httpx
import wsproto.events
from httpx_ws import HTTPXWSException, WebSocketSession
from wsproto.utilities import LocalProtocolError

from siesta_client._ops import raise_for_error
from siesta_client.errors import ClientTimeout, SiestaError, error_from

NORMAL_CLOSE = 1000
WAIT_SECONDS = 0.5
"""The longest ``read`` waits on one connection before it looks whether it was
replaced, and the pump on the WebSocket before it looks whether it should stop."""
FIRST_MESSAGE_SECONDS = 30.0
"""How long a new connection may take to say ``started``."""
MAX_MESSAGE_BYTES = 1024 * 1024
"""The largest message a connection takes (a terminal prints in reads of at most
64 KiB, and shows its screen again in at most 32 KiB); a bigger one closes it (1009)."""
QUEUED_MESSAGES = 512
"""Messages a connection holds for a reader that does not read: past it, the socket
is no longer read and the service's sending waits (backpressure, never memory)."""


class HandedOff(ConnectionError):
    """The instance this connection reached stops: attach again elsewhere."""


BROKEN = (
    HTTPXWSException,
    LocalProtocolError,
    httpcore.NetworkError,
    httpx.TransportError,
    OSError,  # HandedOff, a socket's own errors, and TimeoutError (ClientTimeout)
)
"""What a WebSocket that was closed, cut or handed off raises: attach again."""

Message = bytes | dict[str, Any]
"""What a terminal sends: its bytes, or a JSON message."""


class Connection:
    """One WebSocket to one instance. A pump thread moves what arrives, in order, into
    a bounded queue of its own, and marks the connection ``cut`` when the service
    closes it or says reconnect, or the network breaks: a writer asks ``cut`` without
    taking anything a reader waits for."""

    def __init__(self, stack: contextlib.ExitStack, session: WebSocketSession) -> None:
        self._stack = stack
        self.session = session
        self.cut = threading.Event()
        self.ended = threading.Event()
        """Its terminal's ``exit`` has arrived (it may still be unread)."""
        self._arrived: queue.Queue[Message | BaseException] = queue.Queue(QUEUED_MESSAGES)
        self._stopping = threading.Event()
        self._pump = threading.Thread(target=self._run, name="siesta-terminal", daemon=True)
        self._pump.start()

    @classmethod
    def open(
        cls, http: httpx.Client, path: str, params: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Connection, dict[str, Any]]:
        """A connection and its first message (``started``, or ``reconnect``); the
        handshake's error answer read as an error (``httpx-ws`` would drop its body)."""
        stack = contextlib.ExitStack()
        try:
            handshake = {**headers, **_upgrade_headers()}
            response = stack.enter_context(
                http.stream("GET", path, params=params, headers=handshake)
            )
            if response.status_code != 101:
                response.read()
                raise_for_error(response)
                msg = f"the terminal's WebSocket was answered {response.status_code}"
                raise SiestaError(msg, code="http_error", status=response.status_code)
            stream = response.extensions.get("network_stream")
            if stream is None:
                msg = "this client's transport cannot carry a WebSocket (no network stream)"
                raise SiestaError(msg, code="websocket_unsupported", status=0)
            session = stack.enter_context(
                WebSocketSession(
                    stream,
                    response=response,
                    max_message_size_bytes=MAX_MESSAGE_BYTES,
                    queue_size=QUEUED_MESSAGES,
                )
            )
        except BaseException:
            stack.close()
            raise
        connection = cls(stack, session)
        try:
            return connection, connection._first()
        except BaseException:
            connection.close(NORMAL_CLOSE)
            raise

    def _first(self) -> dict[str, Any]:
        try:
            first = self.receive(FIRST_MESSAGE_SECONDS)
        except queue.Empty:
            msg = f"the terminal's WebSocket said nothing within {FIRST_MESSAGE_SECONDS:g} s"
            fields = {"limit": FIRST_MESSAGE_SECONDS, "unit": "seconds"}
            raise ClientTimeout(msg, code="client_timeout", status=0, fields=fields) from None
        if isinstance(first, dict) and first.get("type") in ("started", "reconnect"):
            return first
        if isinstance(first, dict) and first.get("type") == "error":
            raise error_from(400, first)
        msg = f"the terminal's first message was not 'started': {first!r:.200}"
        raise SiestaError(msg, code="unexpected_answer", status=0)

    def receive(self, timeout: float | None) -> Message:
        """The next message; ``queue.Empty`` after ``timeout``; what cut the connection
        (once) when it was cut."""
        arrived = self._arrived.get(timeout=timeout)
        if isinstance(arrived, BaseException):
            raise arrived
        return arrived

    def unread(self) -> bool:
        return not self._arrived.empty()

    def _run(self) -> None:
        while True:
            try:
                event = self.session.receive(WAIT_SECONDS)
            except (queue.Empty, TimeoutError):  # nothing yet (httpx-ws 0.9, 0.10 says so)
                if self._stopping.is_set():
                    return
                continue
            except BROKEN as error:  # closed by the service, or cut
                self.cut.set()
                self._put(error)
                return
            message = _decoded(event)
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "reconnect":
                self.cut.set()
            elif kind == "exit":
                self.ended.set()
            self._put(message)

    def _put(self, item: Message | BaseException) -> None:
        while not self._stopping.is_set():  # stopping: dropped, the session drained
            try:
                self._arrived.put(item, timeout=WAIT_SECONDS)
                return
            except queue.Full:
                continue

    def close(self, code: int) -> None:
        """Closed, its threads ended: the pump drains the session meanwhile, so that
        ``httpx-ws``'s own receiving thread (which the session's exit joins) is never
        left blocked on a full queue."""
        self._stopping.set()
        with contextlib.suppress(Exception):  # already cut: nothing to tell
            self.session.close(code)
        self._pump.join(4 * WAIT_SECONDS)
        with contextlib.suppress(Exception):
            self._stack.close()


def _decoded(event: wsproto.events.Event) -> Message:
    if isinstance(event, wsproto.events.BytesMessage):
        return bytes(event.data)
    if isinstance(event, wsproto.events.TextMessage):
        try:
            parsed: Any = json.loads(event.data)
        except ValueError:
            parsed = None
        return parsed if isinstance(parsed, dict) else {"type": None}
    return {"type": None}  # nothing a terminal sends


def _upgrade_headers() -> dict[str, str]:
    """RFC 6455's handshake: the key is 16 random bytes, base64."""
    return {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
    }
