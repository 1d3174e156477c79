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

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from siesta_contract.processes import Signal

from siesta_client._ops import Context
from siesta_client._retry import RETRYABLE_STATUSES, Retries
from siesta_client._websocket import BROKEN, NORMAL_CLOSE, WAIT_SECONDS, Connection, HandedOff
from siesta_client.errors import ConnectionFailed, InvalidRequest, SiestaError, error_from

MAX_SIZE = 1000
"""The most columns or rows a terminal may have (the service's limit)."""
ATTACH_RETRYABLE = RETRYABLE_STATUSES | {504}
"""Answers after which attaching again is tried again: the calls' own (``_retry``),
and a gateway timeout too, since an attachment starts nothing that could run twice."""
CUT_SECONDS = 2.0
"""How long a write that found its connection closed waits for the rest of what that
connection received to be queued for ``read``."""


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
        self._connection: Connection | None = None
        self._leftover: Connection | None = None
        """A connection replaced while output it had received was unread: ``read``
        gives that first, in order (a writer may find a connection cut first)."""
        self._finished = False
        self._closing = threading.Event()
        """Set by ``close`` before it waits for the lock: an attachment being made
        again (under the lock, through retries) gives up at its next try."""
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
        """A new terminal (no ``pid`` in ``params``: tried once, a second try could
        start a second shell; a handoff as it started is attached to) or one attached
        again (``pid``: with the client's retries, as a handoff's attachment)."""
        terminal = cls(http, path, context, retries)
        terminal._size = _checked_size(params.get("cols", 80), params.get("rows", 24))
        if "pid" in params:
            terminal.pid = int(params["pid"])
            with terminal._lock:
                terminal._reconnect()
            return terminal
        try:
            terminal._connect(params)
        except HandedOff:  # started, then handed off at once: it runs, attach to it
            with terminal._lock:
                terminal._reconnect()
        except SiestaError:  # the service's answer, or the client's own timeout
            raise
        except BROKEN as error:  # as every other call of the client says it
            msg = f"opening a terminal: {type(error).__name__}: {error}"
            raise ConnectionFailed(msg, code="connection_failed", status=0) from error
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
        """Keys typed (text is sent as UTF-8); none typed sends nothing."""
        data = keys.encode() if isinstance(keys, str) else keys
        if not data:  # an empty frame is not keys: the service would refuse it
            return
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
        """Hang the terminal up (SIGHUP), unless it ended or was detached. An attachment
        being made again on another thread gives up at its next try (``close`` waits
        for the try under way only); the terminal, unreached, then runs on detached, as
        does one whose connection was cut and not attached again yet (``attach_terminal``
        then ``close`` hangs it up)."""
        self._closing.set()
        with self._lock:
            self._finish()

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _connect(self, params: dict[str, Any]) -> None:
        """A connection (holding the lock, or before the terminal is shared); raises
        ``HandedOff`` when it reached an instance that stops (``pid`` is then known)."""
        connection, message = Connection.open(self._http, self._path, params, self._headers)
        if message.get("type") == "reconnect":
            connection.close(NORMAL_CLOSE)
            self.pid = int(message["pid"])
            msg = f"terminal {self.pid} was handed off as it was reached"
            raise HandedOff(msg)
        self.pid = int(message["pid"])
        self._connection = connection

    def _send(self, send: Callable[[Connection], None]) -> None:
        for _ in range(2):  # once more on a new attachment if this one was cut
            connection = self._current()
            if not connection.cut.is_set():  # a cut connection may still take writes, unread
                try:
                    send(connection)
                    return
                except BROKEN:
                    # Closed under the write: let what arrived before the close reach
                    # the reader first (an ``exit`` among it means the terminal ended).
                    connection.cut.wait(CUT_SECONDS)
            if connection.ended.is_set():
                msg = f"terminal {self.pid} has ended: read its end with read()"
                raise SiestaError(msg, code="terminal_ended", status=0)
            self._attach_again(connection)
        msg = f"terminal {self.pid}: its connection broke twice while sending"
        raise ConnectionFailed(msg, code="connection_failed", status=0)

    def _current(self) -> Connection:
        with self._lock:
            if self.exit is not None:  # its end was read: said as such, as documented
                msg = f"terminal {self.pid} has ended ({self.exit})"
                raise SiestaError(msg, code="terminal_ended", status=0)
            if self._finished or self._connection is None:
                msg = f"terminal {self.pid} is closed (detached or closed)"
                raise SiestaError(msg, code="terminal_closed", status=0)
            return self._connection

    def _control(self, message: dict[str, Any], connection: Connection) -> bool:
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

    def _attach_again(self, broken: Connection) -> None:
        """A new attachment through any instance, unless another thread made one."""
        with self._lock:
            if self._finished or self._connection is not broken:
                return
            broken.close(NORMAL_CLOSE)
            self._connection = None
            self._leftover = broken if broken.unread() else None
            self._reconnect()

    def _reconnect(self) -> None:
        """Attach by ``pid`` until it works, the retries are spent or ``close`` is called
        (holding the lock). Whatever ends it without a connection finishes the terminal."""
        attempt = 0
        try:
            while not self._closing.is_set():
                attempt += 1
                try:
                    cols, rows = self._size
                    self._connect({"pid": self.pid, "cols": cols, "rows": rows})
                    return
                except BROKEN as error:
                    why = f"{type(error).__name__}: {error}"
                except SiestaError as error:
                    if error.status not in ATTACH_RETRYABLE:
                        raise
                    why = str(error)
                if attempt >= self._retries.attempts:
                    msg = f"attaching to terminal {self.pid} again: {why}, {attempt} tries"
                    fields = {"limit": self._retries.attempts, "unit": "tries"}
                    raise ConnectionFailed(msg, code="connection_failed", status=0, fields=fields)
                self._closing.wait(self._retries.delay(attempt, None))
        except BaseException:
            self._finished = True
            raise

    def _finish(self) -> None:
        """Closes the connection (holding the lock)."""
        self._finished = True
        self._leftover = None
        if self._connection is not None:
            self._connection.close(NORMAL_CLOSE)


def _checked_size(cols: int, rows: int) -> tuple[int, int]:
    for name, value in (("cols", cols), ("rows", rows)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
            msg = f"{name} must be a whole number from 1 to {MAX_SIZE}, not {value!r}"
            fields = {"limit": MAX_SIZE, "field": name}
            raise InvalidRequest(msg, code="invalid_arguments", status=400, fields=fields)
    return cols, rows
