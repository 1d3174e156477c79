"""One TCP connection to a port of a sandbox, as a byte pipe for an asyncio caller.

The connection is a ``siesta-fs connect PORT`` process started over the sandbox's
agent channel with stdin: what is written to it goes to the server, what the server
sends comes back as its stdout. It is started under the conversation's lease, which
resumes a paused or stopped sandbox, and outlives the lease as background processes
do: a long stream never keeps ``runCommand`` waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable

import anyio
from anyio import to_thread

from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.providers.base import ProcessSpec, RunningProcess, SandboxInside
from runtime.sandbox.ports.errors import (
    PortConnectionLost,
    PortNotListening,
    PortSandboxMissing,
    TooManyPortConnections,
)
from runtime.sandbox.ports.settings import PortsSettings
from runtime.sandbox.processes import Dropped, Ended, Output, Reader
from runtime.sessions.manager import SessionManager

log = logging.getLogger(__name__)

CONNECTOR = "/usr/local/lib/siesta/siesta-fs"
REFUSED_EXIT = 111
"""``siesta-fs connect``'s exit status when nothing listens (ECONNREFUSED)."""
CONNECTED = b"siesta-fs: connected"
TOUCH_EVERY_SECONDS = 30.0
"""How often traffic marks the sandbox used, so the idle tiers leave a live stream be."""


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
        self._touched = time.monotonic()

    async def opened(self) -> None:
        """Wait until the connection is made inside the sandbox (its server may not
        have spoken yet): ``PortNotListening`` when nothing listens on the port."""
        deadline = time.monotonic() + self._settings.connect_timeout_seconds
        while True:
            event = await self._reader.next(max(0.0, deadline - time.monotonic()))
            if event is None:
                msg = (
                    f"the connection to port {self.port} did not open within "
                    f"{self._settings.connect_timeout_seconds:g} s "
                    "(SIESTA_PORTS__CONNECT_TIMEOUT_SECONDS)"
                )
                raise PortConnectionLost(
                    msg, port=self.port, limit=self._settings.connect_timeout_seconds
                )
            if isinstance(event, Output) and event.stream == "stdout":
                self._early.append(event.data)  # a server that speaks first
            elif isinstance(event, Output) and CONNECTED in event.data:
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
        while not self._ended:
            event = await self._reader.next(self._settings.idle_timeout_seconds)
            if event is None:
                msg = (
                    f"nothing came from port {self.port} for "
                    f"{self._settings.idle_timeout_seconds:g} s "
                    "(SIESTA_PORTS__IDLE_TIMEOUT_SECONDS)"
                )
                raise PortConnectionLost(
                    msg, port=self.port, limit=self._settings.idle_timeout_seconds
                )
            if isinstance(event, Output) and event.stream == "stdout":
                await self._note_traffic()
                return event.data
            if isinstance(event, Ended):
                self._ended = True
            elif isinstance(event, Dropped):
                self._ended = True
                msg = (
                    f"the client read port {self.port} too slowly: more than "
                    f"{self._settings.connection_buffer_bytes} bytes waited "
                    "(SIESTA_PORTS__CONNECTION_BUFFER_BYTES)"
                )
                raise PortConnectionLost(
                    msg, port=self.port, limit=self._settings.connection_buffer_bytes
                )
        return b""

    async def send(self, data: bytes) -> None:
        if data:
            await self._note_traffic()
            await to_thread.run_sync(self._handle.write, data)

    async def send_eof(self) -> None:
        with contextlib.suppress(SiestaError):  # the server is gone already
            await to_thread.run_sync(self._handle.close_input)

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

    async def _note_traffic(self) -> None:
        now = time.monotonic()
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
        paused or stopped. The conversation must have a sandbox: traffic never makes one."""
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
        if self._sessions.describe(ctx) is None:
            msg = "this conversation has no sandbox (its first command makes one)"
            raise PortSandboxMissing(msg, port=port)
        self._take(ctx)
        try:
            spec = ProcessSpec(
                argv=[CONNECTOR, "connect", str(port)],
                timeout_seconds=0,
                max_output_bytes=0,
                kill_grace_seconds=1,
                stdin=True,
            )
            with self._sessions.operation(ctx) as session:
                handle = self._inside.start_process(session.record.sandbox_id, spec)
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


def _follow(handle: RunningProcess, reader: Reader) -> None:
    """The connection's output to its reader until the process ends (its own thread)."""
    try:
        result = handle.wait(lambda stream, data: reader.push(Output(stream, data)))
    except Exception as exc:
        log.debug("port connection %s: its wait ended with %s", handle.pid, exc)
        reader.push(Ended(-1, exited=False, status="unknown", error=str(exc)))
        return
    reader.push(Ended(result.exit_code, exited=not result.timed_out, status="ended"))
