"""One persistent channel to a sandbox's agent, and the requests that share it.

The provider opens the transport (a Docker attach stream, a Kubernetes attach);
this module speaks the agent's protocol over it. A reader thread takes every
frame off the stream as soon as it arrives and hands it to the request it
belongs to, so an idle channel never holds up the engine, and frames of requests
this instance did not send (another instance attached to the same sandbox) are
dropped. Requests are serialised by the conversation's lease; ``cancel`` may
come from another thread at any time.

Every byte from the agent is untrusted (a sandbox's root can replace the agent's
program for its next start). Whatever arrives, the service's memory stays
bounded: the reader holds at most one frame, a request's unread frames at most
``agent_inbox.INBOX_BYTES`` (then the reader waits: backpressure), dropped
frames nothing.
A frame that breaks the protocol closes this channel only, counted in
``siesta_agent_protocol_errors_total``: the request in flight fails with
``ChannelClosed`` and the next one opens a new channel.

Over 400 lines: the reader, the request table and the protocol's framing rules are
one state machine; its frame codec and inbox are already apart (``agent_*``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import secrets
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from runtime.core import metrics
from runtime.providers.agent.inbox import Inbox
from runtime.providers.agent.protocol import (
    AGENT_FRAMES,
    AGENT_FRAMES_V3,
    HEADER,
    Exit,
    Frame,
    FrameReader,
    FrameType,
    ProtocolError,
    SpawnFlag,
    check_from_agent,
    encode,
    parse_error,
    parse_exit,
    spawn_payload,
)
from runtime.providers.agent.send_watch import SEND_WATCH
from runtime.providers.agent.table_frames import (
    table_spawn_payload,
)

log = logging.getLogger(__name__)

STDIN_CHUNK = 256 * 1024
NO_FLAGS = SpawnFlag(0)
OutputSink = Callable[[int, bytes], None]
"""(stream: 1 stdout, 2 stderr, chunk)."""
STRAY_BUDGET = 64 * 1024 * 1024
"""Bytes of frames for ids nobody here waits for, allowed per request while that
request is in flight; each frame counts at least ``STRAY_FRAME_MIN``.

Such frames are dropped, never kept, so memory is not what this bounds: it stops
an agent that floods us with them from holding a call hostage (and a reader
thread busy). It applies only while a request of this channel is in flight:
when idle, frames of another instance's requests are the normal case (Docker
attach sends the agent's stdout to every attached client) and are dropped without
limit. While we hold a request, the conversation's lease says no other instance
is working in the sandbox, so the legitimate strays are small: the last frames
of requests our SPAWN killed (KILL_RUNNING) or of our own earlier requests given
up on, at most a few megabytes in transit. A rate limit would instead cut an idle
channel off from a busy neighbour, and count that as an error."""
STRAY_FRAME_MIN = 512
LOGGED_BYTES = 200
"""How much of a line the agent wrote on its stderr goes to the log."""
START_WAIT_SECONDS = 30.0
"""How long a detached SPAWN may take to exec (the agent answers STARTED or ERROR)."""


class ChannelClosed(Exception):
    """The stream to the agent ended (the sandbox stopped, the engine went away)."""


class ChannelStalled(ChannelClosed):
    """The agent took nothing we sent, or sent nothing a waiting file operation needed,
    for ``limit`` seconds (its sandbox is frozen, say: paused by hand mid-call); the
    channel is closed and the next call opens a new one."""

    def __init__(self, message: str, limit: float) -> None:
        super().__init__(message)
        self.limit = limit


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


class AgentChannel:
    def __init__(
        self,
        transport: Transport,
        name: str,
        stall_seconds: float | None = None,
        *,
        private: bool = False,
    ) -> None:
        """``stall_seconds``: how long a send may make no progress, and a file
        operation wait for the agent's next frame, before the channel is given up
        (``None``: forever). ``private``: a channel of this instance's own (protocol
        3: an engine exec of ``siesta-agent --channel``), which only this instance
        writes and reads, so it may ask for the process table; otherwise the attach
        to the agent's stdin and stdout, shared with every instance."""
        self.name = name
        self.private = private
        self.stall_seconds = stall_seconds
        self._stalled = False
        self._transport = transport
        self._send_lock = threading.Lock()
        self._waiters: dict[int, Inbox] = {}
        self._detached: set[int] = set()
        """Waiters of detached processes: they wait for as long as the process runs,
        so they do not make frames of others count against ``STRAY_BUDGET``."""
        self._waiters_lock = threading.Lock()
        self._stray_bytes = 0
        self._closed = threading.Event()
        self._failure: str | None = None
        self.last_used = time.monotonic()
        self._reader = threading.Thread(target=self._read, name=f"agent-{name}", daemon=True)
        self._reader.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        self._transport.close()
        with self._waiters_lock:
            inboxes = list(self._waiters.values())
        for inbox in inboxes:
            inbox.wake()

    def broken(self, error: ProtocolError) -> ChannelClosed:
        """Closes the channel because the agent broke the protocol, counts it by
        ``error.reason``, and returns the error for the caller to raise."""
        if not self.closed:
            self._failure = str(error)
            metrics.AGENT_PROTOCOL_ERRORS.labels(error.reason).inc()
            log.warning("agent %s broke the protocol (%s): %s", self.name, error.reason, error)
            self.close()
        return ChannelClosed(f"the agent of {self.name} broke the protocol: {error}")

    def ping(self, timeout: float) -> None:
        """Raises ``ChannelClosed`` when no PONG comes back in time."""
        with self._request() as (request_id, frames):
            self._send(encode(FrameType.PING, request_id))
            frame = self._next(frames, time.monotonic() + timeout)
            if frame.type is not FrameType.PONG:
                msg = f"it answered a ping with {frame.type.name}"
                raise self.broken(ProtocolError(msg, "unexpected"))

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
        stall_limited: bool = False,
    ) -> Exit:
        """Start ``argv`` in the sandbox and wait for it to end.

        ``stdin`` is streamed to it (then closed); output frames go to
        ``on_output``. ``wait_seconds`` bounds the wait on this side too (the
        agent enforces ``timeout_ms`` itself): past it, the request is cancelled.
        ``request_id``: the run's id (``collect`` finds it by it); default: a new one.
        ``stall_limited``: a gap of ``stall_seconds`` between two frames ends the wait
        (``ChannelStalled``); for file helpers, which never go quiet while they work.
        """
        if stdin is not None:
            flags |= SpawnFlag.STDIN
        payload = spawn_payload(
            argv, timeout_ms=timeout_ms, grace_ms=grace_ms, cap_bytes=cap_bytes, flags=flags
        )
        deadline = time.monotonic() + wait_seconds if wait_seconds else None
        idle = self.stall_seconds if stall_limited else None
        with self._request(request_id) as (chosen, frames):
            self._send(encode(FrameType.SPAWN, chosen, payload))
            if stdin is not None:
                self._feed(chosen, stdin)
            budget = _OutputBudget(cap_bytes, flags)
            return self._outcome(frames, deadline, on_output, budget, idle)

    def start(
        self,
        argv: list[str],
        *,
        timeout_ms: int = 0,
        grace_ms: int = 0,
        cap_bytes: int = 0,
        stdin: bool = False,
        pty: tuple[int, int] | None = None,
        kept: tuple[int, str] | None = None,
    ) -> StartedRequest:
        """Start ``argv`` as a detached process (protocol 2) and return at once: its
        input, signals and end go through the handle, from any thread; one thread
        calls ``wait``. Raises ``SpawnFailed`` (EINVAL from a protocol-1 agent).
        ``kept``: (ring bytes, tag) for the agent's process table (protocol 3)."""
        flags = SpawnFlag.DETACHED | SpawnFlag.STREAM
        if stdin:
            flags |= SpawnFlag.STDIN
        if pty is not None:
            flags |= SpawnFlag.PTY
        if kept is not None:
            ring_bytes, tag = kept
            payload = table_spawn_payload(
                argv,
                ring_bytes=ring_bytes,
                tag=tag,
                timeout_ms=timeout_ms,
                grace_ms=grace_ms,
                cap_bytes=cap_bytes,
                flags=flags,
            )
        else:
            payload = spawn_payload(
                argv, timeout_ms=timeout_ms, grace_ms=grace_ms, cap_bytes=cap_bytes, flags=flags
            )
        request = self._request()
        chosen, frames = request.__enter__()
        try:
            self._send(encode(FrameType.SPAWN, chosen, payload))
            first = self._next(frames, time.monotonic() + START_WAIT_SECONDS)
            if first.type is FrameType.STARTED:
                pid = int.from_bytes(first.payload, "little")
                if pty is not None:
                    self._send(encode(FrameType.RESIZE, chosen, resize_payload(*pty)))
                with self._waiters_lock:
                    self._detached.add(chosen)
                budget = _OutputBudget(cap_bytes, flags)
                return StartedRequest(self, chosen, pid, frames, budget, request)
        except TimeoutError:
            self.cancel(chosen)  # should it exec after all, it ends at once
            request.__exit__(None, None, None)
            msg = f"the process did not start within {START_WAIT_SECONDS:g} seconds"
            raise SpawnFailed(errno.ETIMEDOUT, msg) from None
        except BaseException:
            self.cancel(chosen)
            request.__exit__(None, None, None)
            raise
        request.__exit__(None, None, None)
        if first.type is FrameType.ERROR:
            raise SpawnFailed(*parse_error(first.payload))
        msg = f"it answered a detached SPAWN with {first.type.name} before STARTED"
        raise self.broken(ProtocolError(msg, "unexpected"))

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
                # The run's cap is its SPAWN's, unknown here: its output is not bounded
                # by the channel (``on_output`` keeps what it keeps).
                return self._outcome(frames, deadline, on_output, _OutputBudget(0, NO_FLAGS))
            except SpawnFailed as failed:
                if failed.errno == errno.ENOENT:
                    return None
                raise

    def _outcome(
        self,
        frames: Inbox,
        deadline: float | None,
        on_output: OutputSink | None,
        output: _OutputBudget,
        idle: float | None = None,
    ) -> Exit:
        while True:
            frame = self._next(frames, deadline, idle)
            if frame.type is FrameType.OUT:
                if not output.take(frame.payload[0], len(frame.payload) - 1):
                    raise self.broken(ProtocolError(output.exceeded(), "output_over_limit"))
                if on_output is not None:
                    on_output(frame.payload[0], frame.payload[1:])
            elif frame.type is FrameType.EXIT:
                return parse_exit(frame.payload)
            elif frame.type is FrameType.ERROR:
                raise SpawnFailed(*parse_error(frame.payload))
            else:
                msg = f"it answered a request with {frame.type.name}"
                raise self.broken(ProtocolError(msg, "unexpected"))

    def cancel(self, request_id: int = 0) -> None:
        """Kill the process group of a request (0: of every running request)."""
        with contextlib.suppress(ChannelClosed):
            self._send(encode(FrameType.CANCEL, request_id))

    # -- plumbing ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _request(self, request_id: int | None = None) -> Iterator[tuple[int, Inbox]]:
        if self.closed:
            msg = f"the channel to {self.name} is closed"
            raise ChannelClosed(msg)
        request_id = request_id or secrets.randbits(63) or 1
        frames = Inbox(self._closed)
        with self._waiters_lock:
            if request_id in self._waiters:
                msg = f"request {request_id:x} is already waited for on this channel"
                raise SpawnFailed(errno.EEXIST, msg)
            self._waiters[request_id] = frames
            self._stray_bytes = 0
        if self.closed:  # the reader may have ended before it could see this request
            frames.put(None)
        self.last_used = time.monotonic()
        try:
            yield request_id, frames
        finally:
            with self._waiters_lock:
                del self._waiters[request_id]
            frames.abandon()
            self.last_used = time.monotonic()

    def _next(self, frames: Inbox, deadline: float | None, idle: float | None = None) -> Frame:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        stalls = idle is not None and (timeout is None or idle < timeout)
        if stalls:
            timeout = idle
        try:
            frame = frames.get(timeout=timeout)
        except queue.Empty:
            if stalls:
                assert idle is not None
                msg = f"its agent sent nothing for {idle:g} seconds"
                raise self._stall(msg) from None
            raise TimeoutError from None
        if frame is None:
            msg = f"the channel to {self.name} closed during the request"
            if self._failure is not None:
                msg = f"the agent of {self.name} broke the protocol: {self._failure}"
            raise ChannelClosed(msg)
        return frame

    def _feed(self, request_id: int, chunks: Iterable[bytes]) -> None:
        for chunk in chunks:
            for start in range(0, len(chunk), STDIN_CHUNK):
                self._send(encode(FrameType.STDIN, request_id, chunk[start : start + STDIN_CHUNK]))
        self._send(encode(FrameType.STDIN_EOF, request_id))

    def _send(self, data: bytes) -> None:
        try:
            with self._send_lock, SEND_WATCH.watching(self):
                self._transport.send(data)
        except OSError as exc:
            self.close()
            if self._stalled and self.stall_seconds is not None:
                msg = f"its agent took nothing for {self.stall_seconds:g} seconds"
                raise self._stall(msg) from exc
            msg = f"the channel to {self.name} failed: {exc}"
            raise ChannelClosed(msg) from exc

    def give_up_sending(self) -> None:
        """A send made no progress for ``stall_seconds`` (the send watch's call):
        closing the transport wakes it with an error."""
        self._stalled = True
        self.close()

    def _stall(self, what: str) -> ChannelStalled:
        assert self.stall_seconds is not None
        self.close()
        msg = f"the channel to {self.name} stalled: {what} (the limit)"
        return ChannelStalled(msg, self.stall_seconds)

    def _read(self) -> None:
        reader = FrameReader(AGENT_FRAMES_V3 if self.private else AGENT_FRAMES)
        try:
            for stream, chunk in self._transport.receive():
                if stream != 1:
                    line = chunk[:LOGGED_BYTES].decode(errors="replace").rstrip()
                    log.debug("agent %s: %s", self.name, line)
                    continue
                for frame in reader.feed(chunk):
                    self._deliver(frame)
            if reader.buffered and not self.closed:
                msg = f"its stream ended inside a frame ({reader.buffered} bytes of it)"
                raise ProtocolError(msg, "truncated")
        except ProtocolError as exc:
            self.broken(exc)
        finally:
            # Closed at once: an attach nobody reads would stall the agent's stdout
            # for every client (the engine writes to them in turn).
            self.close()
            with self._waiters_lock:
                inboxes = list(self._waiters.values())
            for inbox in inboxes:
                inbox.put(None)

    def _deliver(self, frame: Frame) -> None:
        flooded = False
        with self._waiters_lock:
            inbox = self._waiters.get(frame.id)
            if inbox is None and len(self._waiters) > len(self._detached):  # STRAY_BUDGET
                self._stray_bytes += max(HEADER.size + len(frame.payload), STRAY_FRAME_MIN)
                flooded = self._stray_bytes > STRAY_BUDGET
        if flooded:
            msg = f"more than {STRAY_BUDGET} bytes of frames for requests nobody waits for"
            raise ProtocolError(msg, "stray_flood")
        if inbox is None:  # another client's request, or one that ended
            return
        check_from_agent(frame)
        inbox.put(frame)


class _OutputBudget:
    """The OUT bytes a SPAWN allows per stream: with a cap, ``cap`` with STREAM and
    none without it; without a cap, any (the caller's sink bounds what it keeps)."""

    def __init__(self, cap_bytes: int, flags: SpawnFlag) -> None:
        self._limit = None if not cap_bytes else cap_bytes if SpawnFlag.STREAM in flags else 0
        self._sent = {1: 0, 2: 0}

    def take(self, stream: int, size: int) -> bool:
        self._sent[stream] += size
        return self._limit is None or self._sent[stream] <= self._limit

    def exceeded(self) -> str:
        return f"it sent {max(self._sent.values())} bytes of output, at most {self._limit} allowed"


class StartedRequest:
    """A detached process in the sandbox (``AgentChannel.start``): feed it, signal it,
    and wait for its end (one thread waits; the rest may come from any thread)."""

    def __init__(
        self,
        channel: AgentChannel,
        request_id: int,
        pid: int,
        frames: Inbox,
        budget: _OutputBudget,
        registration: contextlib.AbstractContextManager[tuple[int, Inbox]],
    ) -> None:
        self._channel = channel
        self.request_id = request_id
        self.pid = pid
        """The process's pid in the sandbox."""
        self._frames = frames
        self._budget = budget
        self._registration = registration
        self._closed = False

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), STDIN_CHUNK):
            chunk = data[start : start + STDIN_CHUNK]
            self._channel._send(encode(FrameType.STDIN, self.request_id, chunk))

    def close_input(self) -> None:
        self._channel._send(encode(FrameType.STDIN_EOF, self.request_id))

    def signal(self, signo: int) -> None:
        self._channel._send(encode(FrameType.SIGNAL, self.request_id, signo.to_bytes(4, "little")))

    def kill(self) -> None:
        self._channel.cancel(self.request_id)

    def resize(self, columns: int, rows: int) -> None:
        self._channel._send(
            encode(FrameType.RESIZE, self.request_id, resize_payload(columns, rows))
        )

    def wait(self, on_output: OutputSink) -> Exit:
        """Output to ``on_output`` until the process ends; then its EXIT."""
        try:
            return self._channel._outcome(self._frames, None, on_output, self._budget)
        finally:
            self.close()

    def close(self) -> None:
        """Stop waiting for it here (its frames are dropped from now on); twice is fine.
        ``wait`` does it; a caller that gives up without waiting must."""
        with self._channel._waiters_lock:
            if self._closed:
                return
            self._closed = True
            self._channel._detached.discard(self.request_id)
        self._registration.__exit__(None, None, None)


def resize_payload(columns: int, rows: int) -> bytes:
    return struct.pack("<HH", min(max(columns, 1), 65535), min(max(rows, 1), 65535))
