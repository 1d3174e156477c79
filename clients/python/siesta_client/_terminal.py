"""A terminal in a conversation's sandbox, over the service's terminal WebSocket.

``Conversation.open_terminal`` starts a login shell in a real terminal;
``Conversation.attach_terminal(pid)`` attaches to one started earlier (its last
screenful is shown again, as a terminal redraws). The WebSocket rides on the
client's own ``httpx.Client`` (its base URL, token, TLS settings and transport), by
way of ``httpx-ws``.

An instance that stops hands its terminals off (``{"type": "reconnect"}``, close
1012; also as the first message, to a connection that reached it while it drains),
and one that dies cuts them; either way the terminal runs on in the sandbox, so this
class attaches again, through whatever instance the next connection reaches, and
``read`` goes on with the screen shown again. A broken connection is attached again
the same way: if the instance that served it is alive it hung the terminal up when
the socket closed (SIGHUP, as closing a terminal window does), and the new
attachment reports how it ended. Keys typed in the moment a connection is cut may
be lost, as with any terminal over a network.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx
import wsproto.events
from httpx_ws import HTTPXWSException, WebSocketSession
from wsproto.utilities import LocalProtocolError

from siesta_contract.processes import Signal

from siesta_client._ops import Context, raise_for_error
from siesta_client._retry import Retries
from siesta_client.errors import (
    ClientTimeout,
    ConnectionFailed,
    InvalidRequest,
    SiestaError,
    error_from,
)

NORMAL_CLOSE = 1000
MAX_SIZE = 1000
"""The most columns or rows a terminal may have (the service's limit)."""
WAIT_SECONDS = 0.5
"""The longest ``read`` waits on one connection before it looks whether it was
replaced, and the pump on the WebSocket before it looks whether it should stop."""
FIRST_MESSAGE_SECONDS = 30.0
"""How long a new connection may take to say ``started``."""
QUEUED_MESSAGES = 512
"""Messages a connection holds for a reader that does not read: past it, the socket
is no longer read and the service's sending waits (backpressure, never memory)."""
RETRYABLE_STATUSES = (502, 503, 504)


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


@dataclass(frozen=True)
class TerminalExit:
    """How the terminal's shell ended: its exit code (128 + the signal's number when a
    signal ended it, as a shell reports it), the service's wording of it, and why the
    service lost it, if it did (then there is no exit code)."""

    exit_code: int | None
    status: str | None
    error: str | None = None


class Terminal:
    """A terminal: ``read`` what it prints, ``write`` keys, ``resize`` it, ``signal``
    it; ``detach`` leaves it running (attach again by ``pid``), ``close`` hangs it up.
    A context manager (closing on exit). ``read`` and ``write`` may be called from
    different threads; ``read`` should be called while it runs (what it prints waits
    for it, and the service waits when too much does)."""

    def __init__(self, http: httpx.Client, path: str, context: Context, retries: Retries) -> None:
        self._http = http
        self._path = path
        self._headers = context.headers()
        self._retries = retries
        self._lock = threading.Lock()
        self._connection: _Connection | None = None
        self._leftover: _Connection | None = None
        """A connection replaced while output it had received was unread: ``read``
        gives that first, in order (a writer may find a connection cut first)."""
        self._finished = False
        self.pid = 0
        self._size = (80, 24)
        self.exit: TerminalExit | None = None
        """Set once the terminal has ended (``read`` then returns ``b""``)."""

    @classmethod
    def open(
        cls,
        http: httpx.Client,
        path: str,
        context: Context,
        retries: Retries,
        params: dict[str, Any],
    ) -> Terminal:
        """A new terminal (no ``pid`` in ``params``: not retried, it would start a
        second shell) or one attached again (``pid``)."""
        terminal = cls(http, path, context, retries)
        cols, rows = int(params.get("cols", 80)), int(params.get("rows", 24))
        terminal._size = _checked_size(cols, rows)
        try:
            terminal._connect(params)
        except HandedOff:  # started, then handed off at once: it runs, attach to it
            with terminal._lock:
                terminal._reconnect()
        return terminal

    def read(self, timeout: float | None = None) -> bytes:
        """The next bytes the terminal prints; ``b""`` once it has ended (``exit`` says
        how) or was detached or closed. ``TimeoutError`` when nothing comes within
        ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:  # (held while another thread attaches again)
                leftover = self._leftover
                source = leftover or self._connection
                if source is None or (self._finished and leftover is None):
                    return b""
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # In short waits: another thread (a write) may attach again meanwhile.
            wait = WAIT_SECONDS if left is None else min(left, WAIT_SECONDS)
            try:
                message = source.receive(0 if leftover else wait)
            except queue.Empty:
                if leftover is not None:  # all of it read: on to the new attachment
                    with self._lock:
                        if self._leftover is leftover:
                            self._leftover = None
                    continue
                if left is not None and left <= wait:
                    msg = f"terminal {self.pid} printed nothing within {timeout} s"
                    raise TimeoutError(msg) from None
                continue
            except BROKEN:
                self._attach_again(source)  # (nothing to do for a leftover's own cut)
                continue
            if isinstance(message, bytes):
                return message
            if self._control(message, source):
                return b""

    def read_until(self, text: str, timeout: float = 30.0) -> str:
        """What the terminal prints (decoded) up to and including ``text``: wait for a
        prompt or an answer. ``TimeoutError`` (with what it printed) after ``timeout``."""
        seen = ""
        deadline = time.monotonic() + timeout
        while text not in seen:
            try:
                chunk = self.read(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                msg = f"no {text!r} from terminal {self.pid} within {timeout} s: {seen[-500:]!r}"
                raise TimeoutError(msg) from None
            if not chunk:
                msg = f"terminal {self.pid} ended ({self.exit}) before {text!r}: {seen[-500:]!r}"
                raise SiestaError(msg, code="terminal_ended", status=0)
            seen += chunk.decode(errors="replace")
        return seen

    def write(self, keys: str | bytes) -> None:
        """Keys typed (text is sent as UTF-8)."""
        data = keys.encode() if isinstance(keys, str) else keys
        self._send(lambda connection: connection.session.send_bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        size = _checked_size(cols, rows)
        self._send(lambda c: c.session.send_json({"type": "resize", "cols": cols, "rows": rows}))
        self._size = size  # what an attachment after a handoff asks for

    def signal(self, signal: Signal) -> None:
        """A signal to the terminal's shell itself (an interactive shell ignores SIGINT
        and SIGTERM; Ctrl-C is a key: ``write("\\x03")`` interrupts what runs in it)."""
        self._send(lambda c: c.session.send_json({"type": "signal", "signal": signal}))

    def detach(self) -> None:
        """Leave the terminal running: ``attach_terminal(pid)`` gets it back."""
        with self._lock:
            connection = self._connection
            if self._finished or connection is None:
                return
        if connection.cut.is_set() and not connection.ended.is_set():
            self._attach_again(connection)  # else it runs on unattached, or is hung up
        with self._lock:
            if self._connection is not None and not self._finished:
                with contextlib.suppress(*BROKEN):  # cut just now: it runs on, handed off
                    self._connection.session.send_json({"type": "detach"})
            self._finish()

    def close(self) -> None:
        """Hang the terminal up (SIGHUP), unless it ended or was detached."""
        with self._lock:
            self._finish()

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _connect(self, params: dict[str, Any]) -> None:
        """A connection (holding the lock, or before the terminal is shared); raises
        ``HandedOff`` when it reached an instance that stops (``pid`` is then known)."""
        connection, message = _Connection.open(self._http, self._path, params, self._headers)
        if message.get("type") == "reconnect":
            connection.close(NORMAL_CLOSE)
            self.pid = int(message["pid"])
            msg = f"terminal {self.pid} was handed off as it was reached"
            raise HandedOff(msg)
        self.pid = int(message["pid"])
        self._connection = connection

    def _send(self, send: Callable[[_Connection], None]) -> None:
        for _ in range(2):  # once more on a new attachment if this one was cut
            connection = self._current()
            if connection.ended.is_set():
                msg = f"terminal {self.pid} has ended: read its end with read()"
                raise SiestaError(msg, code="terminal_ended", status=0)
            if connection.cut.is_set():  # a cut connection may still take writes, unread
                self._attach_again(connection)
                continue
            try:
                send(connection)
                return
            except BROKEN:
                self._attach_again(connection)
        msg = f"terminal {self.pid}: its connection broke twice while sending"
        raise ConnectionFailed(msg, code="connection_failed", status=0)

    def _current(self) -> _Connection:
        with self._lock:
            if self._finished or self._connection is None:
                msg = f"terminal {self.pid} is closed (ended, detached or closed)"
                raise SiestaError(msg, code="terminal_closed", status=0)
            return self._connection

    def _control(self, message: dict[str, Any], connection: _Connection) -> bool:
        """A JSON message from the service; True when it was the terminal's end."""
        kind = message.get("type")
        if kind == "exit":
            got = message.get
            self.exit = TerminalExit(got("exitCode"), got("status"), got("error"))
            with self._lock:
                self._finish()
            return True
        if kind == "reconnect":
            self._attach_again(connection)
        elif kind == "error":
            raise error_from(400, message)
        return False  # "started" again after an attachment, or a newer service's

    def _attach_again(self, broken: _Connection) -> None:
        """A new attachment through any instance, unless another thread made one."""
        with self._lock:
            if self._finished or self._connection is not broken:
                return
            broken.close(NORMAL_CLOSE)
            self._connection = None
            self._leftover = broken if broken.unread() else None
            self._reconnect()

    def _reconnect(self) -> None:
        """Attach by ``pid`` until it works or the retries are spent (holding the lock).
        Whatever ends it without a connection finishes the terminal."""
        attempt = 0
        try:
            while True:
                attempt += 1
                try:
                    cols, rows = self._size
                    self._connect({"pid": self.pid, "cols": cols, "rows": rows})
                    return
                except BROKEN as error:
                    why = f"{type(error).__name__}: {error}"
                except SiestaError as error:
                    if error.status not in RETRYABLE_STATUSES:
                        raise
                    why = str(error)
                if attempt >= self._retries.attempts:
                    msg = f"attaching to terminal {self.pid} again: {why}, {attempt} tries"
                    fields = {"limit": self._retries.attempts, "unit": "tries"}
                    raise ConnectionFailed(msg, code="connection_failed", status=0, fields=fields)
                time.sleep(self._retries.delay(attempt, None))
        except BaseException:
            self._finished = True
            raise

    def _finish(self) -> None:
        """Closes the connection (holding the lock)."""
        self._finished = True
        self._leftover = None
        if self._connection is not None:
            self._connection.close(NORMAL_CLOSE)


class _Connection:
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
    ) -> tuple[_Connection, dict[str, Any]]:
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
                WebSocketSession(stream, response=response, queue_size=QUEUED_MESSAGES)
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
            except queue.Empty:
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


def _checked_size(cols: int, rows: int) -> tuple[int, int]:
    for name, value in (("cols", cols), ("rows", rows)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
            msg = f"{name} must be a whole number from 1 to {MAX_SIZE}, not {value!r}"
            fields = {"limit": MAX_SIZE, "field": name}
            raise InvalidRequest(msg, code="invalid_arguments", status=400, fields=fields)
    return cols, rows


def _upgrade_headers() -> dict[str, str]:
    """RFC 6455's handshake: the key is 16 random bytes, base64."""
    return {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
    }
