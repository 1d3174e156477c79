"""One TCP connection to a port of a sandbox, as a byte pipe for an asyncio caller.

The connection is a ``siesta-fs connect PORT`` process started over the sandbox's
agent channel with stdin: what is written to it goes to the server, what the server
sends comes back as its stdout. A sandbox known to run gets it without the
conversation's lease (a preview answers while a long command holds it); any other is
started under the lease, which resumes a paused or stopped sandbox. Either way it
outlives the lease as background processes do: a long stream never keeps
``runCommand`` waiting. Traffic never makes a sandbox, nor replaces a retired or lost one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from anyio import to_thread

from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.core.records import SessionRecord
from runtime.sandbox.ports.errors import (
    PortConnectionLost,
    PortNotListening,
    PortSandboxMissing,
    TooManyPortConnections,
)
from runtime.sandbox.ports.settings import PortsSettings
from runtime.sandbox.processes import Dropped, Ended, Output, Reader
from runtime.seams.providers import ProcessSpec, RunningProcess, SandboxInside
from runtime.sessions.manager import SessionManager

log = logging.getLogger(__name__)

CONNECTOR = "/usr/local/lib/siesta/siesta-fs"
REFUSED_EXIT = 111
"""``siesta-fs connect``'s exit status when nothing listens (ECONNREFUSED)."""
CONNECTED = b"siesta-fs: connected"
TOUCH_EVERY_SECONDS = 30.0
"""How often traffic marks the sandbox used, so the idle tiers leave a live stream be."""


@dataclass(frozen=True)
class _Limit:
    """One of a connection's limits: what its error says, its settings field and the
    environment variable that sets it."""

    template: str
    field: str
    setting: str


_CONNECT = _Limit(
    "the connection to port {port} did not open within {limit:g} s",
    "connect_timeout_seconds",
    "SIESTA_PORTS__CONNECT_TIMEOUT_SECONDS",
)
_IDLE = _Limit(
    "nothing went to or came from port {port} for {limit:g} s",
    "idle_timeout_seconds",
    "SIESTA_PORTS__IDLE_TIMEOUT_SECONDS",
)
_BUFFER = _Limit(
    "the client read port {port} too slowly: more than {limit:.0f} bytes waited",
    "connection_buffer_bytes",
    "SIESTA_PORTS__CONNECTION_BUFFER_BYTES",
)
_EARLY = _Limit(
    "port {port} sent more than {limit:.0f} bytes before its connection opened",
    "early_buffer_bytes",
    "SIESTA_PORTS__EARLY_BUFFER_BYTES",
)


class PortConnection:
    """Bytes both ways to one port; ``receive`` answers ``b""`` once the server closed."""

    def __init__(
        self,
        port: int,
        handle: RunningProcess,
        reader: Reader,
        settings: PortsSettings,
        touch: Callable[[], object],
        release: Callable[[], None],
    ) -> None:
        self.port = port
        self._handle = handle
        self._reader = reader
        self._settings = settings
        self._touch = touch
        self._release: Callable[[], None] | None = release
        self._early: list[bytes] = []
        self._ended = False
        self._touched = self._last_traffic = time.monotonic()
        # Both directions of a WebSocket write (a message, a Pong): each write whole, as
        # the process's stdin takes a large one in several frames.
        self._writing = threading.Lock()

    async def opened(self) -> None:
        """Wait until the connection is made inside the sandbox (its server may not
        have spoken yet): ``PortNotListening`` when nothing listens on the port."""
        deadline = time.monotonic() + self._settings.connect_timeout_seconds
        early = 0
        while True:
            event = await self._reader.next(max(0.0, deadline - time.monotonic()))
            if event is None:
                raise self._over_limit(_CONNECT)
            if isinstance(event, Output) and event.stream == "stdout":
                # A server that speaks first; nothing reads it yet, so it is bounded here
                # (the reader's own limit counts only what is still queued).
                early += len(event.data)
                if early > self._settings.early_buffer_bytes:
                    raise self._over_limit(_EARLY)
                self._early.append(event.data)
            elif isinstance(event, Output) and CONNECTED in event.data:
                self._last_traffic = time.monotonic()
                return
            elif isinstance(event, Ended):
                self._ended = True
                if event.exit_code == REFUSED_EXIT:
                    msg = f"nothing in the sandbox listens on port {self.port}"
                    raise PortNotListening(msg, port=self.port)
                msg = f"the connection to port {self.port} failed ({event.status})"
                raise PortConnectionLost(msg, port=self.port)
            elif isinstance(event, Dropped):
                raise PortConnectionLost(event.reason, port=self.port)

    async def receive(self) -> bytes:
        """The server's next bytes; ``b""`` when it closed its side."""
        if self._early:
            return self._early.pop(0)
        idle = self._settings.idle_timeout_seconds
        while not self._ended:
            quiet_until = self._last_traffic + idle
            event = await self._reader.next(max(0.0, quiet_until - time.monotonic()))
            if event is None:
                if time.monotonic() - self._last_traffic < idle:
                    continue  # the client sent something meanwhile: still alive
                raise self._over_limit(_IDLE)
            if isinstance(event, Output) and event.stream == "stdout":
                await self._note_traffic()
                return event.data
            if isinstance(event, Ended):
                self._ended = True
            elif isinstance(event, Dropped):
                self._ended = True
                raise self._over_limit(_BUFFER)
        return b""

    async def send(self, data: bytes) -> None:
        if data:
            await self._note_traffic()
            await to_thread.run_sync(self._write, data)

    async def send_eof(self) -> None:
        with contextlib.suppress(SiestaError):  # the server is gone already
            await to_thread.run_sync(self._close_input)

    async def aclose(self) -> None:
        """End the connection (the process in the sandbox) if it still runs."""
        release, self._release = self._release, None
        if release is None:
            return
        # Shielded: a client that went away cancels the caller, and the process must end.
        with anyio.CancelScope(shield=True):
            try:
                if not self._ended:
                    with contextlib.suppress(SiestaError):
                        await to_thread.run_sync(self._handle.kill)
            finally:
                release()

    def _over_limit(self, cut_at: _Limit) -> PortConnectionLost:
        """The error of a connection cut at one of its limits, naming the setting."""
        limit: float = getattr(self._settings, cut_at.field)
        msg = f"{cut_at.template.format(port=self.port, limit=limit)} ({cut_at.setting})"
        return PortConnectionLost(msg, port=self.port, limit=limit)

    def _write(self, data: bytes) -> None:
        with self._writing:
            self._handle.write(data)

    def _close_input(self) -> None:
        with self._writing:
            self._handle.close_input()

    async def _note_traffic(self) -> None:
        """Traffic either way: the connection is not idle, nor is its sandbox."""
        now = self._last_traffic = time.monotonic()
        if now - self._touched >= TOUCH_EVERY_SECONDS:
            self._touched = now
            with contextlib.suppress(SiestaError):
                await to_thread.run_sync(self._touch)


class SandboxPorts:
    """Opens connections to sandboxes' ports, at most ``max_connections_per_sandbox``
    at once per sandbox (through this instance)."""

    def __init__(
        self, sessions: SessionManager, inside: SandboxInside, settings: PortsSettings
    ) -> None:
        self._sessions = sessions
        self._inside = inside
        self.settings = settings
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    async def open(self, ctx: CallContext, port: int) -> PortConnection:
        """A connection to ``port`` of the conversation's sandbox, resumed if it was
        paused or stopped. The conversation must have a sandbox: traffic never makes one,
        nor replaces a retired or lost one (``PortSandboxMissing``)."""
        loop = asyncio.get_running_loop()
        connection = await to_thread.run_sync(lambda: self._start(ctx, port, loop))
        try:
            await connection.opened()
        except BaseException:
            await connection.aclose()
            raise
        return connection

    def open_count(self, ctx: CallContext) -> int:
        with self._lock:
            return self._open.get(ctx.key, 0)

    def _start(
        self, ctx: CallContext, port: int, loop: asyncio.AbstractEventLoop
    ) -> PortConnection:
        with_sandbox(self._sessions.describe(ctx), port)
        self._take(ctx)
        try:
            handle = self._start_connector(ctx, port)
        except BaseException:
            self._give_back(ctx)
            raise
        reader = Reader(loop, self.settings.connection_buffer_bytes)
        thread = threading.Thread(
            target=_follow, args=(handle, reader), name=f"port-{port}-{handle.pid}", daemon=True
        )
        thread.start()
        return PortConnection(
            port,
            handle,
            reader,
            self.settings,
            touch=lambda: self._sessions.note_used(ctx),
            release=lambda: self._give_back(ctx),
        )

    def _start_connector(self, ctx: CallContext, port: int) -> RunningProcess:
        spec = ProcessSpec(
            argv=[CONNECTOR, "connect", str(port)],
            timeout_seconds=0,
            max_output_bytes=0,
            kill_grace_seconds=1,
            stdin=True,
        )
        running = self._sessions.known_running(ctx)
        if running is not None:
            # No lease: a long command holds it, and the port must answer meanwhile.
            handle = self._inside.start_process(running.sandbox_id, spec)
            self._sessions.note_used(ctx)
            return handle
        with self._sessions.operation(ctx) as session:  # resumes a paused or stopped one
            return self._inside.start_process(session.record.sandbox_id, spec)

    def _take(self, ctx: CallContext) -> None:
        limit = self.settings.max_connections_per_sandbox
        with self._lock:
            if self._open.get(ctx.key, 0) >= limit:
                msg = (
                    f"{limit} connections to this sandbox's ports are open already, the limit "
                    "(SIESTA_PORTS__MAX_CONNECTIONS_PER_SANDBOX); try again when one ends"
                )
                raise TooManyPortConnections(msg, limit=limit)
            self._open[ctx.key] = self._open.get(ctx.key, 0) + 1

    def _give_back(self, ctx: CallContext) -> None:
        with self._lock:
            left = self._open.get(ctx.key, 1) - 1
            if left:
                self._open[ctx.key] = left
            else:
                self._open.pop(ctx.key, None)


def with_sandbox(record: SessionRecord | None, port: int) -> SessionRecord:
    """``record``, if it has a sandbox to reach; else ``PortSandboxMissing``: traffic
    never makes one, nor replaces a retired or lost one (anyone with a port link could)."""
    if record is None:
        msg = "this conversation has no sandbox (its first command makes one)"
        raise PortSandboxMissing(msg, port=port)
    if not record.status.has_sandbox:
        msg = (
            f"this conversation's sandbox is {record.status.value} "
            "(its next command makes a new one)"
        )
        raise PortSandboxMissing(msg, port=port)
    return record


def _follow(handle: RunningProcess, reader: Reader) -> None:
    """The connection's output to its reader until the process ends (its own thread)."""
    try:
        result = handle.wait(lambda stream, data: reader.push(Output(stream, data)))
    except Exception as exc:
        log.debug("port connection %s: its wait ended with %s", handle.pid, exc)
        reader.push(Ended(-1, exited=False, status="unknown", error=str(exc)))
        return
    reader.push(Ended(result.exit_code, exited=not result.timed_out, status="ended"))
