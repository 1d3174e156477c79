"""A terminal in a conversation's sandbox, over the service's terminal WebSocket.

``Conversation.open_terminal`` starts a login shell in a real terminal;
``Conversation.attach_terminal(pid)`` attaches to one started earlier (its last
screenful is shown again, as a terminal redraws). The WebSocket rides on the
client's own ``httpx.Client`` (its base URL, token, TLS settings and transport), by
way of ``httpx-ws``.

An instance that stops hands its terminals off (``{"type": "reconnect"}``, close
1012), and one that dies cuts them; either way the terminal runs on in the
sandbox, so this class attaches again, through whatever instance the next
connection reaches, and ``read`` goes on with the screen shown again. A broken
connection is attached again the same way: if the instance that served it is
alive it hung the terminal up when the socket closed (SIGHUP, as closing a
terminal window does), and the new attachment reports how it ended.
"""

from __future__ import annotations

import base64
import collections
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
from siesta_client.errors import ConnectionFailed, SiestaError, error_from

HANDED_OFF = 1012
"""The close code of an instance that stops (service restart): attach again."""
NORMAL_CLOSE = 1000
WAIT_SECONDS = 0.5
"""The longest ``read`` waits on one connection before it looks whether it was replaced."""
BROKEN = (
    HTTPXWSException,
    LocalProtocolError,
    httpcore.NetworkError,
    httpx.TransportError,
    OSError,
)
"""What a WebSocket that was closed or cut raises: attach again."""


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
    different threads."""

    def __init__(self, http: httpx.Client, path: str, context: Context, retries: Retries) -> None:
        self._http = http
        self._path = path
        self._headers = context.headers()
        self._retries = retries
        self._lock = threading.Lock()
        self._connection: _Connection | None = None
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
        terminal._open(params)
        return terminal

    def _open(self, params: dict[str, Any]) -> None:
        self._size = (int(params.get("cols", 80)), int(params.get("rows", 24)))
        self._connection = _Connection.open(self._http, self._path, params, self._headers)
        self.pid = self._connection.started_pid()

    def read(self, timeout: float | None = None) -> bytes:
        """The next bytes the terminal prints; ``b""`` once it has ended (``exit`` says
        how) or was detached or closed. ``TimeoutError`` when nothing comes within
        ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:  # (held while another thread attaches again)
                connection = self._connection
                if self._finished or connection is None:
                    return b""
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # In short waits: another thread (a write) may attach again meanwhile, and
            # the closed connection would never wake this one.
            wait = WAIT_SECONDS if left is None else min(left, WAIT_SECONDS)
            try:
                message = connection.receive(wait)
            except queue.Empty:
                if left is not None and left <= wait:
                    msg = f"terminal {self.pid} printed nothing within {timeout} s"
                    raise TimeoutError(msg) from None
                continue
            except BROKEN:
                self._attach_again(connection)
                continue
            if isinstance(message, bytes):
                return message
            if self._control(message, connection):
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
        self._send_json({"type": "resize", "cols": cols, "rows": rows})
        self._size = (cols, rows)  # what an attachment after a handoff asks for

    def signal(self, signal: Signal) -> None:
        """A signal to the terminal's shell itself (an interactive shell ignores SIGINT
        and SIGTERM; Ctrl-C is a key: ``write("\\x03")`` interrupts what runs in it)."""
        self._send_json({"type": "signal", "signal": signal})

    def detach(self) -> None:
        """Leave the terminal running: ``attach_terminal(pid)`` gets it back."""
        with self._lock:
            if self._connection is not None and not self._finished:
                with contextlib.suppress(Exception):  # gone already: it runs on
                    self._connection.session.send_json({"type": "detach"})
            self._finish(NORMAL_CLOSE)

    def close(self) -> None:
        """Hang the terminal up (SIGHUP), unless it ended or was detached."""
        with self._lock:
            self._finish(NORMAL_CLOSE)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send_json(self, message: dict[str, Any]) -> None:
        self._send(lambda connection: connection.session.send_json(message))

    def _send(self, send: Callable[[_Connection], None]) -> None:
        for _ in range(2):  # once more on a new attachment if this one was cut
            connection = self._current()
            if connection.cut():
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
                self._finish(NORMAL_CLOSE)
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
            attempt = 0
            while True:
                attempt += 1
                try:
                    cols, rows = self._size
                    self._open({"pid": self.pid, "cols": cols, "rows": rows})
                    return
                except BROKEN as error:
                    why = f"{type(error).__name__}: {error}"
                except SiestaError as error:
                    if error.status not in (502, 503, 504):
                        self._finished = True
                        raise
                    why = str(error)
                if attempt >= self._retries.attempts:
                    self._finished = True
                    msg = f"attaching to terminal {self.pid} again: {why}, {attempt} tries"
                    fields = {"limit": self._retries.attempts, "unit": "tries"}
                    raise ConnectionFailed(msg, code="connection_failed", status=0, fields=fields)
                time.sleep(self._retries.delay(attempt, None))

    def _finish(self, code: int) -> None:
        """Closes the connection (holding the lock)."""
        self._finished = True
        if self._connection is not None:
            self._connection.close(code)


class _Connection:
    """One WebSocket to one instance: the handshake's error answer read as an error
    (``httpx-ws`` would drop its body), messages as bytes or parsed JSON."""

    def __init__(self, stack: contextlib.ExitStack, session: WebSocketSession) -> None:
        self._stack = stack
        self.session = session
        self._arrived: collections.deque[wsproto.events.Event | BaseException]
        self._arrived = collections.deque()
        self._cut = False

    @classmethod
    def open(
        cls, http: httpx.Client, path: str, params: dict[str, Any], headers: dict[str, str]
    ) -> _Connection:
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
            stream = response.extensions["network_stream"]
            session = stack.enter_context(WebSocketSession(stream, response=response))
        except BaseException:
            stack.close()
            raise
        return cls(stack, session)

    def started_pid(self) -> int:
        """The pid of the ``started`` message, the service's first."""
        try:
            first = self.receive(30.0)
        except queue.Empty:
            msg = "the terminal's WebSocket said nothing within 30 s"
            raise TimeoutError(msg) from None
        if isinstance(first, dict) and first.get("type") == "started":
            return int(first["pid"])
        if isinstance(first, dict) and first.get("type") == "error":
            raise error_from(400, first)
        msg = f"the terminal's first message was not 'started': {first!r:.200}"
        raise SiestaError(msg, code="unexpected_answer", status=0)

    def cut(self) -> bool:
        """Whether the service closed or the network cut this connection, from what has
        already arrived (kept for ``receive``, in order). Asked before sending: a cut
        connection may still take writes (a proxy closing it reads none), so keys sent
        on it would be lost."""
        while not self._cut:
            try:
                self._arrived.append(self.session.receive(0))
            except queue.Empty:
                break
            except BROKEN as error:
                self._arrived.append(error)
                self._cut = True
        return self._cut

    def receive(self, timeout: float | None) -> bytes | dict[str, Any]:
        if self._arrived:
            arrived = self._arrived.popleft()
            if isinstance(arrived, BaseException):
                raise arrived
            event = arrived
        else:
            event = self.session.receive(timeout)
        if isinstance(event, wsproto.events.BytesMessage):
            return bytes(event.data)
        if isinstance(event, wsproto.events.TextMessage):
            parsed: Any = json.loads(event.data)
            return parsed if isinstance(parsed, dict) else {"type": None}
        return {"type": None}  # nothing a terminal sends

    def close(self, code: int) -> None:
        with contextlib.suppress(Exception):  # already cut: nothing to tell
            self.session.close(code)
        with contextlib.suppress(Exception):
            self._stack.close()


def _upgrade_headers() -> dict[str, str]:
    """RFC 6455's handshake: the key is 16 random bytes, base64."""
    return {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
    }
