"""The sandbox's process table, asked for over a private channel (protocol 3).

The agent keeps every process of its own (E2B's commands, terminals, /v1 background
processes, watchers) with a ring of its recent output: any service instance lists
them, follows one from an offset, types into it, signals and resizes it, through its
own channel. Nothing here is kept beyond the call: the table is the agent's.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import threading
import time
from collections.abc import Iterator

from runtime.core.errors import SandboxUnavailable
from runtime.core.output import captured
from runtime.providers.agent.channel import STDIN_CHUNK, AgentChannel, ChannelClosed, SpawnFailed
from runtime.providers.agent.inbox import Inbox
from runtime.providers.agent.protocol import (
    FROM_TAKEN,
    Frame,
    FrameType,
    ProtocolError,
    encode,
    parse_error,
)
from runtime.providers.agent.table_frames import (
    attach_payload,
    parse_attached,
    parse_data,
    parse_pexit,
    parse_table,
    pid_payload,
)
from runtime.providers.base import (
    ExecResult,
    OutputAt,
    OutputEnded,
    OutputEvent,
    OutputListener,
    OutputLost,
    ProcessEntry,
)

ANSWER_SECONDS = 5.0
"""How long a table request may wait for the agent's answer. A running agent answers in
milliseconds, a CPU-starved one within a second or two; one that stays silent longer is
in a sandbox frozen under the call (paused by the idle tiers meanwhile: the caller read
its record just before), and waiting on would only make a listing hang (it was 30 s:
schemathesis' 10 s response limit caught a process listing taking all of it)."""
CREDIT_BYTES = 1024 * 1024
"""Output a follower lets the agent send ahead of what it has taken: the most a slow
reader here holds (the agent keeps the rest in the process's ring, and moves on past
what its ring cannot keep: never the process's pace)."""
STREAMS = {1: "stdout", 2: "stderr"}


class ProcessGone(Exception):
    """The agent knows no process with that pid (it ended and was forgotten)."""


def table(channel: AgentChannel) -> list[ProcessEntry]:
    with _answer(channel, FrameType.LIST, b"") as frame:
        if frame.type is not FrameType.TABLE:
            raise _unexpected(channel, frame)
        entries = parse_table(frame.payload)
    return [
        ProcessEntry(
            pid=entry.pid,
            running=not entry.exited,
            exit_code=entry.exit_code,
            pty=entry.pty,
            tag=entry.tag,
            first=entry.first,
            end=entry.end,
        )
        for entry in entries
    ]


def output(channel: AgentChannel, entry: ProcessEntry, start: int) -> list[tuple[str, bytes]]:
    """What ``entry``'s process printed from ``start`` to ``entry.end``, of what its ring
    still keeps: one attachment, detached once it has reached the end."""
    names = {1: "pty", 2: "pty"} if entry.pty else STREAMS
    wanted = max(entry.end - max(start, entry.first), 0)
    if wanted == 0:
        return []
    pieces: list[tuple[str, bytes]] = []
    with channel._request() as (request_id, frames):
        payload = attach_payload(entry.pid, start, min(wanted, 2**32 - 1))
        channel._send(encode(FrameType.ATTACH, request_id, payload))
        deadline = time.monotonic() + ANSWER_SECONDS
        try:
            while True:
                frame = channel._next(frames, deadline)
                if frame.type is FrameType.ATTACHED:
                    continue
                if frame.type is FrameType.PEXIT:
                    return pieces
                if frame.type is FrameType.ERROR:
                    raise SpawnFailed(*parse_error(frame.payload))
                if frame.type is not FrameType.DATA:
                    raise _unexpected(channel, frame)
                data = parse_data(frame.payload)
                kept = data.data[: max(entry.end - data.offset, 0)]
                if kept and data.stream in names:
                    pieces.append((names[data.stream], kept))
                if data.offset + len(data.data) >= entry.end:
                    return pieces
        finally:
            with contextlib.suppress(ChannelClosed):
                channel._send(encode(FrameType.DETACH, request_id))


def untaken(channel: AgentChannel, entry: ProcessEntry) -> tuple[int, list[tuple[int, bytes]]]:
    """``entry``'s stdout from its TAKE cursor to its end now: (the bytes its ring lost
    past the cursor, unread; its pieces with their offsets)."""
    chunks: list[tuple[int, bytes]] = []
    lost = 0
    with channel._request() as (request_id, frames):
        credit = min(max(entry.end - entry.first, 1) + CREDIT_BYTES, 2**32 - 1)
        payload = attach_payload(entry.pid, FROM_TAKEN, credit)
        channel._send(encode(FrameType.ATTACH, request_id, payload))
        deadline = time.monotonic() + ANSWER_SECONDS
        end = None
        try:
            while True:
                frame = channel._next(frames, deadline)
                if frame.type is FrameType.ATTACHED:
                    attached = parse_attached(frame.payload)
                    lost, end = attached.first - attached.asked, attached.end
                    if attached.first >= end:
                        break
                elif frame.type is FrameType.DATA:
                    data = parse_data(frame.payload)
                    if data.stream == 1:
                        chunks.append((data.offset, data.data))
                    if end is not None and data.offset + len(data.data) >= end:
                        break
                elif frame.type is FrameType.PEXIT:
                    break
                elif frame.type is FrameType.ERROR:
                    raise SpawnFailed(*parse_error(frame.payload))
                else:
                    raise _unexpected(channel, frame)
        finally:
            with contextlib.suppress(ChannelClosed):
                channel._send(encode(FrameType.DETACH, request_id))
    return lost, chunks


POLL_SECONDS = 1.0
"""How often a reader's stream looks whether its reader has gone (``stop``)."""


def stream(
    channel: AgentChannel, entry: ProcessEntry, start: int, stop: threading.Event
) -> Iterator[OutputEvent]:
    """``entry``'s output from ``start`` as it comes, until it ends or ``stop`` is set."""
    names = {1: "pty", 2: "pty"} if entry.pty else STREAMS
    with channel._request() as (request_id, frames):
        channel._send(
            encode(FrameType.ATTACH, request_id, attach_payload(entry.pid, start, CREDIT_BYTES))
        )
        credit = CREDIT_BYTES
        try:
            while not stop.is_set():
                try:
                    frame = channel._next(frames, time.monotonic() + POLL_SECONDS)
                except TimeoutError:
                    continue
                if frame.type is FrameType.ATTACHED:
                    attached = parse_attached(frame.payload)
                    if attached.first > attached.asked:
                        yield OutputLost(attached.first - attached.asked)
                elif frame.type is FrameType.DATA:
                    data = parse_data(frame.payload)
                    credit -= len(data.data)
                    if credit <= CREDIT_BYTES // 2:
                        grant = CREDIT_BYTES - credit
                        more = grant.to_bytes(4, "little")
                        channel._send(encode(FrameType.CREDIT, request_id, more))
                        credit += grant
                    if data.data and data.stream in names:
                        yield OutputAt(data.offset, names[data.stream], data.data)
                elif frame.type is FrameType.PEXIT:
                    yield OutputEnded(parse_pexit(frame.payload).exit_code)
                    return
                elif frame.type is FrameType.ERROR:
                    raise SpawnFailed(*parse_error(frame.payload))
                else:
                    raise _unexpected(channel, frame)
        finally:
            with contextlib.suppress(ChannelClosed):
                channel._send(encode(FrameType.DETACH, request_id))


def take(channel: AgentChannel, pid: int, upto: int) -> None:
    with _answer(channel, FrameType.TAKE, pid_payload(pid, upto, fmt="Q")) as frame:
        if frame.type is not FrameType.OK:
            raise _unexpected(channel, frame)


class FollowedProcess:
    """``RunningProcess`` over the table frames: a process this channel did not start."""

    def __init__(self, channel: AgentChannel, pid: int, *, terminal: bool, start: int) -> None:
        self._channel = channel
        self._pid = pid
        self._start = start
        self._streams = {1: "pty", 2: "pty"} if terminal else STREAMS
        self._attachment: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), STDIN_CHUNK):
            self._ok(FrameType.PINPUT, pid_payload(self._pid) + data[start : start + STDIN_CHUNK])

    def close_input(self) -> None:
        self._ok(FrameType.PEOF, pid_payload(self._pid))

    def signal(self, signo: int) -> None:
        self._ok(FrameType.PSIGNAL, pid_payload(self._pid, signo, fmt="I"))

    def kill(self) -> None:
        with contextlib.suppress(SandboxUnavailable):  # gone already: nothing to kill
            self.signal(signal.SIGKILL)

    def resize(self, columns: int, rows: int) -> None:
        rows, columns = min(max(rows, 1), 65535), min(max(columns, 1), 65535)
        self._ok(FrameType.PRESIZE, pid_payload(self._pid, rows, columns, fmt="HH"))

    def wait(self, on_output: OutputListener) -> ExecResult:
        """Output from now on to ``on_output`` until the process ends; then its end."""
        try:
            with self._channel._request() as (request_id, frames):
                self._attachment = request_id
                payload = attach_payload(self._pid, self._start, CREDIT_BYTES)
                self._channel._send(encode(FrameType.ATTACH, request_id, payload))
                return self._follow(request_id, frames, on_output)
        except ChannelClosed as exc:
            msg = f"the connection to the sandbox ended while following a process ({exc})"
            raise SandboxUnavailable(msg) from exc
        finally:
            self._attachment = None

    def _follow(self, request_id: int, frames: Inbox, on_output: OutputListener) -> ExecResult:
        credit = CREDIT_BYTES
        while True:
            frame = self._channel._next(frames, None)
            if frame.type is FrameType.ATTACHED:
                parse_attached(frame.payload)
            elif frame.type is FrameType.DATA:
                data = parse_data(frame.payload)
                if data.stream in self._streams and data.data:
                    on_output(self._streams[data.stream], data.data)
                credit -= len(data.data)
                if credit <= CREDIT_BYTES // 2:  # topped up in big steps
                    grant = CREDIT_BYTES - credit
                    more = grant.to_bytes(4, "little")
                    self._channel._send(encode(FrameType.CREDIT, request_id, more))
                    credit += grant
            elif frame.type is FrameType.PEXIT:
                ended = parse_pexit(frame.payload)
                return _result(ended.exit_code, ended.duration_ms)
            elif frame.type is FrameType.ERROR:
                message = parse_error(frame.payload)[1]
                msg = f"following process {self._pid}: {message}"
                raise SandboxUnavailable(msg)
            else:
                raise _unexpected(self._channel, frame)

    def close(self) -> None:
        attachment = self._attachment
        if attachment is not None:
            with contextlib.suppress(ChannelClosed):
                self._channel._send(encode(FrameType.DETACH, attachment))

    def _ok(self, frame_type: FrameType, payload: bytes) -> None:
        try:
            with _answer(self._channel, frame_type, payload) as frame:
                if frame.type is not FrameType.OK:
                    raise _unexpected(self._channel, frame)
        except SpawnFailed as failed:
            if failed.errno == errno.ESRCH:
                msg = f"the process {self._pid} has ended"
                raise SandboxUnavailable(msg) from failed
            raise SandboxUnavailable(str(failed)) from failed
        except ChannelClosed as exc:
            msg = f"the connection to the sandbox ended ({exc})"
            raise SandboxUnavailable(msg) from exc


@contextlib.contextmanager
def _answer(channel: AgentChannel, frame_type: FrameType, payload: bytes) -> Iterator[Frame]:
    """Send one table request and yield its one answer (an ERROR raises SpawnFailed)."""
    with channel._request() as (request_id, frames):
        channel._send(encode(frame_type, request_id, payload))
        frame = channel._next(frames, time.monotonic() + ANSWER_SECONDS)
        if frame.type is FrameType.ERROR:
            raise SpawnFailed(*parse_error(frame.payload))
        yield frame


def _unexpected(channel: AgentChannel, frame: Frame) -> ChannelClosed:
    msg = f"it answered a table request with {frame.type.name}"
    return channel.broken(ProtocolError(msg, "unexpected"))


def _result(exit_code: int, duration_ms: int) -> ExecResult:
    empty = captured(b"", b"", 0)  # the output went to the listener as it came
    return ExecResult(exit_code, empty, empty, timed_out=False, duration_ms=duration_ms)
