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
from collections.abc import Callable, Generator, Iterator

from runtime.core.errors import SandboxUnavailable
from runtime.core.output import captured
from runtime.providers.agent.channel import STDIN_CHUNK, AgentChannel, ChannelClosed, SpawnFailed
from runtime.providers.agent.protocol import (
    FROM_TAKEN,
    Frame,
    FrameType,
    ProtocolError,
    encode,
    parse_error,
)
from runtime.providers.agent.table_frames import (
    Attached,
    Data,
    ProcessExit,
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


Attachment = Generator[Attached | Data | ProcessExit | None, None, None]
"""What one attachment yields: its ATTACHED, its DATA, its PEXIT (the last), and None
when a poll window passed with nothing (a ``poll`` attachment only)."""


def attachment(
    channel: AgentChannel,
    pid: int,
    start: int,
    credit: int,
    *,
    deadline: Callable[[], float | None],
    poll: bool = False,
    top_up: bool = True,
    opened: Callable[[int], None] | None = None,
) -> Attachment:
    """One ATTACH to ``pid``'s output from ``start``, letting the agent send ``credit``
    bytes ahead (topped up in big steps as they are taken, with ``top_up``), each wait
    until ``deadline()`` (None: no limit; past it: ``TimeoutError``, or a None yielded
    with ``poll``), DETACHed however it ends. ``opened`` gets the request id (a
    DETACH from another thread ends the attachment). An ERROR raises ``SpawnFailed``."""
    with channel._request() as (request_id, frames):
        if opened is not None:
            opened(request_id)
        channel._send(encode(FrameType.ATTACH, request_id, attach_payload(pid, start, credit)))
        left = credit
        try:
            while True:
                try:
                    frame = channel._next(frames, deadline())
                except TimeoutError:
                    if not poll:
                        raise
                    yield None
                    continue
                if frame.type is FrameType.ATTACHED:
                    yield parse_attached(frame.payload)
                elif frame.type is FrameType.DATA:
                    data = parse_data(frame.payload)
                    left -= len(data.data)
                    if top_up and left <= credit // 2:
                        grant = credit - left
                        channel._send(
                            encode(FrameType.CREDIT, request_id, grant.to_bytes(4, "little"))
                        )
                        left += grant
                    yield data
                elif frame.type is FrameType.PEXIT:
                    yield parse_pexit(frame.payload)
                    return
                elif frame.type is FrameType.ERROR:
                    raise SpawnFailed(*parse_error(frame.payload))
                else:
                    raise _unexpected(channel, frame)
        finally:
            with contextlib.suppress(ChannelClosed):
                channel._send(encode(FrameType.DETACH, request_id))


def _within(seconds: float) -> Callable[[], float]:
    """One deadline for a whole attachment, ``seconds`` from now."""
    deadline = time.monotonic() + seconds
    return lambda: deadline


def output(channel: AgentChannel, entry: ProcessEntry, start: int) -> list[tuple[str, bytes]]:
    """What ``entry``'s process printed from ``start`` to ``entry.end``, of what its ring
    still keeps: one attachment, detached once it has reached the end."""
    names = {1: "pty", 2: "pty"} if entry.pty else STREAMS
    wanted = max(entry.end - max(start, entry.first), 0)
    if wanted == 0:
        return []
    pieces: list[tuple[str, bytes]] = []
    credit = min(wanted, 2**32 - 1)
    frames = attachment(
        channel, entry.pid, start, credit, deadline=_within(ANSWER_SECONDS), top_up=False
    )
    with contextlib.closing(frames):
        for frame in frames:
            if not isinstance(frame, Data):
                continue  # its ATTACHED; a PEXIT is its last
            kept = frame.data[: max(entry.end - frame.offset, 0)]
            if kept and frame.stream in names:
                pieces.append((names[frame.stream], kept))
            if frame.offset + len(frame.data) >= entry.end:
                break
    return pieces


def untaken(channel: AgentChannel, entry: ProcessEntry) -> tuple[int, list[tuple[int, bytes]]]:
    """``entry``'s stdout from its TAKE cursor to its end now: (the bytes its ring lost
    past the cursor, unread; its pieces with their offsets)."""
    chunks: list[tuple[int, bytes]] = []
    lost, end = 0, None
    credit = min(max(entry.end - entry.first, 1) + CREDIT_BYTES, 2**32 - 1)
    frames = attachment(
        channel, entry.pid, FROM_TAKEN, credit, deadline=_within(ANSWER_SECONDS), top_up=False
    )
    with contextlib.closing(frames):
        for frame in frames:
            if isinstance(frame, Attached):
                lost, end = frame.first - frame.asked, frame.end
                if frame.first >= end:
                    break
            elif isinstance(frame, Data):
                if frame.stream == 1:
                    chunks.append((frame.offset, frame.data))
                if end is not None and frame.offset + len(frame.data) >= end:
                    break
    return lost, chunks


POLL_SECONDS = 1.0
"""How often a reader's stream looks whether its reader has gone (``stop``)."""


def stream(
    channel: AgentChannel, entry: ProcessEntry, start: int, stop: threading.Event
) -> Iterator[OutputEvent]:
    """``entry``'s output from ``start`` as it comes, until it ends or ``stop`` is set."""
    names = {1: "pty", 2: "pty"} if entry.pty else STREAMS
    frames = attachment(
        channel,
        entry.pid,
        start,
        CREDIT_BYTES,
        deadline=lambda: time.monotonic() + POLL_SECONDS,
        poll=True,
    )
    with contextlib.closing(frames):
        for frame in frames:
            if stop.is_set():
                return
            if isinstance(frame, Attached):
                if frame.first > frame.asked:
                    yield OutputLost(frame.first - frame.asked)
            elif isinstance(frame, Data):
                if frame.data and frame.stream in names:
                    yield OutputAt(frame.offset, names[frame.stream], frame.data)
            elif isinstance(frame, ProcessExit):
                yield OutputEnded(frame.exit_code)


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
        frames = attachment(
            self._channel,
            self._pid,
            self._start,
            CREDIT_BYTES,
            deadline=lambda: None,
            opened=self._opened,
        )
        try:
            with contextlib.closing(frames):
                for frame in frames:
                    if isinstance(frame, Data) and frame.stream in self._streams and frame.data:
                        on_output(self._streams[frame.stream], frame.data)
                    elif isinstance(frame, ProcessExit):
                        return _result(frame.exit_code, frame.duration_ms)
        except SpawnFailed as failed:
            msg = f"following process {self._pid}: {failed}"
            raise SandboxUnavailable(msg) from failed
        except ChannelClosed as exc:
            msg = f"the connection to the sandbox ended while following a process ({exc})"
            raise SandboxUnavailable(msg) from exc
        finally:
            self._attachment = None
        msg = f"following process {self._pid}: its attachment ended before the process"
        raise SandboxUnavailable(msg)

    def _opened(self, request_id: int) -> None:
        self._attachment = request_id

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
