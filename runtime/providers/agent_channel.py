"""One persistent channel to a sandbox's agent, and the requests that share it.

The provider opens the transport (a Docker attach stream, a Kubernetes attach);
this module speaks the agent's protocol over it. A reader thread takes every
frame off the stream as soon as it arrives and hands it to the request it
belongs to, so an idle channel never holds up the engine, and frames of requests
this instance did not send (another instance attached to the same sandbox) are
dropped. Requests are serialised by the conversation's lease; ``cancel`` may
come from another thread at any time.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from runtime.providers.agent_protocol import (
    Exit,
    Frame,
    FrameReader,
    FrameType,
    ProtocolError,
    SpawnFlag,
    encode,
    parse_error,
    parse_exit,
    spawn_payload,
)

log = logging.getLogger(__name__)

STDIN_CHUNK = 256 * 1024
NO_FLAGS = SpawnFlag(0)
OutputSink = Callable[[int, bytes], None]
"""(stream: 1 stdout, 2 stderr, chunk)."""


class ChannelClosed(Exception):
    """The stream to the agent ended (the sandbox stopped, the engine went away)."""


class SpawnFailed(Exception):
    """The agent could not start the process (``errno``: e.g. EAGAIN at the pids limit)."""

    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno


class Transport(Protocol):
    """Bytes to the agent's stdin; bytes from its stdout, demultiplexed."""

    def send(self, data: bytes) -> None: ...

    def receive(self) -> Iterator[tuple[int, bytes]]:
        """(stream, chunk) until the stream ends; stream 1 is stdout, 2 stderr."""

    def close(self) -> None: ...


class DockerStreamFrames:
    """Docker's multiplexed stream (Tty off): 8-byte headers (stream, size), then data."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The (stream, chunk) frames completed by ``data``."""
        pending = self._pending
        pending += data
        frames = []
        while len(pending) >= 8:
            size = int.from_bytes(pending[4:8], "big")
            if len(pending) < 8 + size:
                break
            frames.append((pending[0], bytes(pending[8 : 8 + size])))
            del pending[: 8 + size]
        return frames


class DockerAttachTransport:
    """A hijacked ``/containers/{id}/attach`` socket (Tty off: 8-byte stream headers)."""

    def __init__(self, sock: socket.socket, keep: object = None) -> None:
        self._sock = sock
        self._keep = keep  # the SDK's wrapper: collected, it would close the socket

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def receive(self) -> Iterator[tuple[int, bytes]]:
        frames = DockerStreamFrames()
        while True:
            try:
                data = self._sock.recv(256 * 1024)
            except OSError:
                return
            if not data:
                return
            yield from frames.feed(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


class AgentChannel:
    def __init__(self, transport: Transport, name: str) -> None:
        self.name = name
        self._transport = transport
        self._send_lock = threading.Lock()
        self._waiters: dict[int, queue.SimpleQueue[Frame | None]] = {}
        self._waiters_lock = threading.Lock()
        self._closed = threading.Event()
        self.last_used = time.monotonic()
        self._reader = threading.Thread(target=self._read, name=f"agent-{name}", daemon=True)
        self._reader.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        self._transport.close()

    def ping(self, timeout: float) -> None:
        """Raises ``ChannelClosed`` when no PONG comes back in time."""
        with self._request() as (request_id, frames):
            self._send(encode(FrameType.PING, request_id))
            frame = self._next(frames, time.monotonic() + timeout)
            if frame.type is not FrameType.PONG:
                msg = f"the agent answered a ping with {frame.type.name}"
                raise ChannelClosed(msg)

    def spawn(
        self,
        argv: list[str],
        *,
        timeout_ms: int = 0,
        grace_ms: int = 0,
        cap_bytes: int = 0,
        flags: SpawnFlag = NO_FLAGS,
        stdin: Iterable[bytes] | None = None,
        on_output: OutputSink | None = None,
        wait_seconds: float | None = None,
        request_id: int | None = None,
    ) -> Exit:
        """Start ``argv`` in the sandbox and wait for it to end.

        ``stdin`` is streamed to it (then closed); output frames go to
        ``on_output``. ``wait_seconds`` bounds the wait on this side too (the
        agent enforces ``timeout_ms`` itself): past it, the request is cancelled.
        ``request_id``: the run's id (``collect`` finds it by it); default: a new one.
        """
        if stdin is not None:
            flags |= SpawnFlag.STDIN
        payload = spawn_payload(
            argv, timeout_ms=timeout_ms, grace_ms=grace_ms, cap_bytes=cap_bytes, flags=flags
        )
        deadline = time.monotonic() + wait_seconds if wait_seconds else None
        with self._request(request_id) as (chosen, frames):
            self._send(encode(FrameType.SPAWN, chosen, payload))
            if stdin is not None:
                self._feed(chosen, stdin)
            return self._outcome(frames, deadline, on_output)

    def collect(
        self,
        request_id: int,
        *,
        on_output: OutputSink | None = None,
        wait_seconds: float | None = None,
    ) -> Exit | None:
        """How the run ``request_id`` ended (waiting for it while it still runs: its
        output from here on goes to ``on_output``); ``None`` when the agent knows no
        such run (it never started, or its final frame is no longer kept)."""
        deadline = time.monotonic() + wait_seconds if wait_seconds else None
        with self._request(request_id) as (chosen, frames):
            self._send(encode(FrameType.RESULT, chosen))
            try:
                return self._outcome(frames, deadline, on_output)
            except SpawnFailed as failed:
                if failed.errno == errno.ENOENT:
                    return None
                raise

    def _outcome(
        self,
        frames: queue.SimpleQueue[Frame | None],
        deadline: float | None,
        on_output: OutputSink | None,
    ) -> Exit:
        while True:
            frame = self._next(frames, deadline)
            if frame.type is FrameType.OUT and frame.payload:
                if on_output is not None:
                    on_output(frame.payload[0], frame.payload[1:])
            elif frame.type is FrameType.EXIT:
                return parse_exit(frame.payload)
            elif frame.type is FrameType.ERROR:
                raise SpawnFailed(*parse_error(frame.payload))

    def cancel(self, request_id: int = 0) -> None:
        """Kill the process group of a request (0: of every running request)."""
        with contextlib.suppress(ChannelClosed):
            self._send(encode(FrameType.CANCEL, request_id))

    # -- plumbing ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _request(
        self, request_id: int | None = None
    ) -> Iterator[tuple[int, queue.SimpleQueue[Frame | None]]]:
        if self.closed:
            msg = f"the channel to {self.name} is closed"
            raise ChannelClosed(msg)
        request_id = request_id or secrets.randbits(63) or 1
        frames: queue.SimpleQueue[Frame | None] = queue.SimpleQueue()
        with self._waiters_lock:
            if request_id in self._waiters:
                msg = f"request {request_id:x} is already waited for on this channel"
                raise SpawnFailed(errno.EEXIST, msg)
            self._waiters[request_id] = frames
        self.last_used = time.monotonic()
        try:
            yield request_id, frames
        finally:
            with self._waiters_lock:
                del self._waiters[request_id]
            self.last_used = time.monotonic()

    def _next(self, frames: queue.SimpleQueue[Frame | None], deadline: float | None) -> Frame:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            frame = frames.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if frame is None:
            msg = f"the channel to {self.name} closed during the request"
            raise ChannelClosed(msg)
        return frame

    def _feed(self, request_id: int, chunks: Iterable[bytes]) -> None:
        for chunk in chunks:
            for start in range(0, len(chunk), STDIN_CHUNK):
                self._send(encode(FrameType.STDIN, request_id, chunk[start : start + STDIN_CHUNK]))
        self._send(encode(FrameType.STDIN_EOF, request_id))

    def _send(self, data: bytes) -> None:
        try:
            with self._send_lock:
                self._transport.send(data)
        except OSError as exc:
            self.close()
            msg = f"the channel to {self.name} failed: {exc}"
            raise ChannelClosed(msg) from exc

    def _read(self) -> None:
        reader = FrameReader()
        try:
            for stream, chunk in self._transport.receive():
                if stream != 1:
                    log.debug("agent %s: %s", self.name, chunk.decode(errors="replace").rstrip())
                    continue
                for frame in reader.feed(chunk):
                    with self._waiters_lock:
                        waiter = self._waiters.get(frame.id)
                    if waiter is not None:  # else: another client's request
                        waiter.put(frame)
        except ProtocolError as exc:
            log.warning("agent %s sent a broken stream: %s", self.name, exc)
        finally:
            self._closed.set()
            with self._waiters_lock:
                for waiter in self._waiters.values():
                    waiter.put(None)
