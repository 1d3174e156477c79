"""Processes that keep running after the call that started them: a conversation's
background processes and terminals (``/v1``) and E2B's commands (``/e2b/envd``).

Each runs in its sandbox as a detached agent request (``SandboxInside.start_process``)
as a user of the sandbox, with one thread here waiting for it and handing every
event to its readers: the stream of the call that started it, and any that
connect later by pid or tag. A reader that does not read is cut off past
``reader_buffer_bytes`` (its stream ends with an error); the process and the
other readers go on. Besides, the last ``TAIL_BYTES`` of each stream are kept for
whoever asks what a process printed lately.

The table of processes is the sandbox's: its agent keeps every process with a ring
of its recent output (protocol 3), so a process started through one instance is
listed, connected to, fed and signalled through any other (a round-robin load
balancer, a reconnect after an instance stopped). This instance's table is a cache:
what it does not know it asks the agent for (``_adopt``), and follows from then on
through its own channel. A sandbox whose agent is older, which this instance reaches only
through the shared attach, has only the processes this instance started.
Processes outlive the call and the conversation's lease, not the sandbox: they end
with it.

Over 400 lines: the process table, its readers and their buffers are one lock's
state; splitting them would spread that lock's invariants over modules.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import math
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest, NotFound, SiestaError
from runtime.core.output import HeadTailBuffer
from runtime.core.records import SessionStatus
from runtime.egress.service import Egress
from runtime.seams.providers import (
    MAX_PROCESS_TAG_BYTES,
    OutputEvent,
    ProcessSpec,
    RunningProcess,
    SandboxInside,
)
from runtime.sessions.manager import SessionManager

log = logging.getLogger(__name__)

BECOME = (
    'g=$(id -g -- "$1" 2>/dev/null) || { echo "setpriv: no user $1" >&2; exit 126; }; '
    "u=$1; shift; "
    'exec setpriv --reuid="$u" --regid="$g" --init-groups --reset-env "$@"'
)
"""Become the user with its own primary group (``nobody`` is in ``nogroup``)."""
CD_AND_RUN = (
    'cd -- "$HOME" 2>/dev/null; if [ -n "$1" ]; then cd -- "$1" || exit 125; fi; '
    'shift; exec env -- "$@"'
)
"""Run as the user by ``setpriv``: start in the user's home (E2B's default working
directory; a relative one is relative to it), then the command with its environment."""


class ProcessNotFound(NotFound):
    code = "process_not_found"


class TooManyProcesses(InvalidRequest):
    code = "too_many_processes"


@dataclass(frozen=True)
class ProcessConfig:
    """What a process was started as (E2B's ``ProcessConfig``)."""

    cmd: str
    args: list[str] = field(default_factory=list)
    envs: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class Started:
    pid: int


@dataclass(frozen=True)
class Output:
    stream: str
    """``stdout``, ``stderr`` or ``pty`` (a terminal's output)."""
    data: bytes


TIMED_OUT = "timed out"
"""An ``Ended`` error: its timeout passed and it was killed."""
LOST = "unknown"
"""An ``Ended`` status: the wait for it ended without its end (its sandbox went, or
the channel to it broke); its exit code is not known."""


@dataclass(frozen=True)
class Ended:
    exit_code: int
    exited: bool
    """False: ended by its timeout (or the sandbox's end)."""
    status: str
    error: str | None = None


@dataclass(frozen=True)
class Dropped:
    """This reader fell too far behind (or the process could not be waited for)."""

    reason: str


ProcessEvent = Started | Output | Ended | Dropped


class Reader:
    """One stream of a process's events, for an asyncio consumer; fed from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit_bytes: int) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[ProcessEvent] = asyncio.Queue()
        self._limit = limit_bytes
        self._pending = 0
        self._lock = threading.Lock()
        self.dropped = False

    def push(self, event: ProcessEvent) -> None:
        with self._lock:
            if self.dropped:
                return
            if isinstance(event, Output):
                self._pending += len(event.data)
                if self._pending > self._limit:
                    self.dropped = True
                    event = Dropped(
                        f"this reader left more than {self._limit} bytes of output unread "
                        "(SIESTA_PROCESSES__READER_BUFFER_BYTES); the process goes on: "
                        "connect again"
                    )
        with contextlib.suppress(RuntimeError):  # the consumer's loop is closed: gone
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def next(self, timeout: float) -> ProcessEvent | None:
        """The next event, or ``None`` after ``timeout`` seconds without one."""
        try:
            event = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(event, Output):
            with self._lock:
                self._pending -= len(event.data)
        return event


KEPT_ENDED = 16
"""Ended processes kept per conversation (newest), for whoever asks how one ended."""
TAIL_BYTES = 64 * 1024
SEEN_ENDED = 1024
"""Of each stream, what a process printed last, kept for ``Process.recent``."""


@dataclass(frozen=True)
class ProcessLimits:
    max_per_sandbox: int
    reader_buffer_bytes: int
    kill_grace_seconds: int
    ring_bytes: int = 1024 * 1024


def describe(config: ProcessConfig, tag: str | None, user: str, *, stdin: bool) -> str:
    """What another instance needs to list and serve the process, kept with it in the
    sandbox (the agent's tag, at most ``MAX_PROCESS_TAG_BYTES``: long arguments and the
    names of its variables are dropped first)."""
    fields: dict[str, object] = {
        "kind": "process",
        "tag": tag,
        "user": user,
        "cmd": config.cmd,
        "cwd": config.cwd,
        "stdin": stdin,
        "args": config.args,
        "envs": sorted(config.envs),
    }
    for dropped in ("", "envs", "args", "cwd", "cmd", "user"):
        fields.pop(dropped, None)
        text = json.dumps(fields, separators=(",", ":"))
        if len(text.encode()) <= MAX_PROCESS_TAG_BYTES:
            return text
    return json.dumps({"kind": "process", "tag": None})


def runs_processes(inside: SandboxInside, sandbox_id: str) -> bool:
    """Whether the sandbox's agent keeps one of these processes running, whichever
    instance started it (False where it cannot be asked: then only this instance's
    own table keeps the sandbox awake, ``SandboxProcesses.keep_running``)."""
    try:
        table = inside.process_table(sandbox_id)
    except SiestaError:
        return False
    return any(entry.running and described(entry.tag) is not None for entry in table or ())


def described(text: str) -> tuple[ProcessConfig, str | None, bool] | None:
    """(config, tag, takes input) of a process another instance started; ``None`` for
    what is not one of these processes (a watcher, a file transfer)."""
    try:
        fields = json.loads(text)
    except ValueError:
        return None
    if not isinstance(fields, dict) or fields.get("kind") != "process":
        return None
    args = fields.get("args")
    config = ProcessConfig(
        cmd=str(fields.get("cmd") or ""),
        args=[str(a) for a in args] if isinstance(args, list) else [],
        envs={str(name): "" for name in fields.get("envs") or [] if isinstance(name, str)},
        cwd=fields["cwd"] if isinstance(fields.get("cwd"), str) else None,
    )
    tag = fields.get("tag")
    return config, tag if isinstance(tag, str) else None, fields.get("stdin") is True


class Process:
    def __init__(
        self,
        ctx: CallContext,
        config: ProcessConfig,
        tag: str | None,
        handle: RunningProcess,
        *,
        stdin: bool = False,
    ) -> None:
        self.ctx = ctx
        self.stdin = stdin
        """Whether it still takes input (started with stdin, not closed since)."""
        self.terminal = False
        """Whether it runs in a terminal (its input and output are the terminal's)."""
        self.config = config
        self.tag = tag
        self.pid = handle.pid
        self.handle = handle
        self.ended: Ended | None = None
        self._ended_event = threading.Event()
        self._readers: list[Reader] = []
        self._tails = {name: HeadTailBuffer(TAIL_BYTES) for name in ("stdout", "stderr", "pty")}
        self._lock = threading.Lock()

    def recent(self) -> dict[str, str]:
        """The last ``TAIL_BYTES`` each stream printed (only streams that printed)."""
        with self._lock:
            return {
                name: tail.result().text
                for name, tail in self._tails.items()
                if tail.result().total_bytes
            }

    def subscribe(self, reader: Reader, *, replay: str | None = None) -> Reader:
        """``reader`` gets ``Started`` and everything from here on (only ``Ended`` when
        the process has ended already). ``replay``: first the last ``TAIL_BYTES / 2``
        that stream printed, with nothing lost or repeated between it and what follows
        (a terminal shown again where it was)."""
        with self._lock:
            reader.push(Started(self.pid))  # under the lock: before any later output
            kept = self._tails[replay].last_bytes() if replay is not None else b""
            if kept:
                reader.push(Output(replay or "", kept))
            if self.ended is None:
                self._readers.append(reader)
                return reader
            reader.push(self.ended)
        return reader

    def unsubscribe(self, reader: Reader) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._readers.remove(reader)

    def _emit(self, event: ProcessEvent) -> None:
        with self._lock:
            if isinstance(event, Output):
                self._tails[event.stream].write(event.data)
            readers = list(self._readers)
        for reader in readers:
            reader.push(event)

    def run(self) -> Ended:
        """Wait for the process (on its own thread), handing out its events."""
        try:
            result = self.handle.wait(lambda stream, data: self._emit(Output(stream, data)))
        except Exception as exc:
            log.warning("process %s: its wait ended with %s", self.pid, exc)
            ended = Ended(-1, exited=False, status=LOST, error=str(exc))
        else:
            if result.timed_out:
                ended = Ended(-1, exited=False, status="signal: killed", error=TIMED_OUT)
            else:
                status = f"exit status {result.exit_code}"
                ended = Ended(
                    result.exit_code,
                    exited=True,
                    status=status,
                    error=status if result.exit_code else None,
                )
        with self._lock:
            self.ended = ended
            readers, self._readers = self._readers, []
        self._ended_event.set()
        for reader in readers:
            reader.push(ended)
        return ended

    def wait_ended(self, timeout: float) -> bool:
        """Whether it ended within ``timeout`` seconds."""
        return self._ended_event.wait(timeout)

    def remember(self, output: list[tuple[str, bytes]]) -> None:
        """What it printed before this instance followed it (for ``recent``, and what a
        terminal shows again); readers get only what comes after."""
        with self._lock:
            for stream, data in output:
                self._tails[stream].write(data)

    @property
    def lost(self) -> bool:
        """Its wait here ended without its end (the channel to its sandbox failed)."""
        return self.ended is not None and self.ended.status == LOST

    def mark_ended(self, ended: Ended) -> None:
        """It had ended before this instance learned of it (from the sandbox's table)."""
        with self._lock:
            self.ended = ended
        self._ended_event.set()


class SandboxProcesses:
    def __init__(
        self,
        sessions: SessionManager,
        inside: SandboxInside,
        egress: Egress,
        limits: ProcessLimits,
    ) -> None:
        self._sessions = sessions
        self._inside = inside
        self._egress = egress
        self.limits = limits
        self._table: dict[str, dict[int, Process]] = {}
        self._ended: dict[str, collections.deque[Process]] = {}
        self._seen_ended: dict[str, set[int]] = {}
        """Ended processes of the sandbox's table already taken in (the agent keeps
        more than ``KEPT_ENDED``: the older ones are not taken in again and again)."""
        self._lock = threading.Lock()

    def start(
        self,
        ctx: CallContext,
        config: ProcessConfig,
        *,
        user: str,
        env_vars: dict[str, str] | None = None,
        tag: str | None = None,
        stdin: bool = False,
        pty: tuple[int, int] | None = None,
        timeout_ms: int | None = None,
        first_reader: Reader | None = None,
    ) -> Process:
        """Start ``config`` in the conversation's sandbox as ``user``, with ``env_vars``
        under the call's own; ``first_reader`` gets all of its events. ``pty``: in a
        terminal of (columns, rows), which takes its input. ``timeout_ms``: killed that
        long after it starts (``None``: never, so it lasts as long as the sandbox)."""
        key = ctx.key
        limit = self.limits.max_per_sandbox
        if len(self.running(ctx)) >= limit:
            msg = (
                f"{limit} processes already run in this sandbox, the limit "
                "(SIESTA_PROCESSES__MAX_PER_SANDBOX); wait for or kill one"
            )
            raise TooManyProcesses(msg, limit=limit)
        with self._sessions.operation(ctx) as session:
            # Under the lease: a deletion, which holds it, revokes every earlier credential.
            environment = {**(env_vars or {}), **self._egress.environment(ctx), **config.envs}
            spec = ProcessSpec(
                argv=as_user(user, config.cwd, environment, [config.cmd, *config.args]),
                timeout_seconds=math.ceil(timeout_ms / 1000) if timeout_ms else 0,
                max_output_bytes=0,  # streamed, never held here beyond each reader's buffer
                kill_grace_seconds=self.limits.kill_grace_seconds,
                stdin=stdin and pty is None,
                pty=pty,
                ring_bytes=self.limits.ring_bytes,
                tag=describe(config, tag, user, stdin=stdin or pty is not None),
            )
            handle = self._inside.start_process(session.record.sandbox_id, spec)
        process = Process(ctx, config, tag, handle, stdin=stdin or pty is not None)
        process.terminal = pty is not None
        if first_reader is not None:
            process.subscribe(first_reader)
        with self._lock:
            self._table.setdefault(key, {})[process.pid] = process
        thread = threading.Thread(
            target=self._wait, args=(key, process), name=f"process-{process.pid}", daemon=True
        )
        thread.start()
        return process

    def _wait(self, key: str, process: Process) -> None:
        ended = process.run()
        log.debug("process %s in %s ended: %s", process.pid, key, ended.status)
        with self._lock:
            table = self._table.get(key, {})
            if table.get(process.pid) is process:
                del table[process.pid]
                self._ended.setdefault(key, collections.deque(maxlen=KEPT_ENDED)).append(process)
            if not table:
                self._table.pop(key, None)

    def _adopt(self, ctx: CallContext) -> None:
        """Learn the sandbox's processes this instance does not know yet from its
        agent, and follow the running ones from now on (without the lease: a running
        sandbox only, never resumed for it)."""
        record = self._sessions.describe(ctx)
        if record is None or record.status is not SessionStatus.ACTIVE:
            return  # paused, stopped or gone: nothing runs to take in
        try:
            entries = self._inside.process_table(record.sandbox_id)
        except SiestaError as exc:  # e.g. paused since: what this instance knows it has
            log.debug("the processes of %s could not be listed: %s", ctx.key, exc)
            return
        if entries is None:
            return
        with self._lock:
            known = set(self._table.get(ctx.key, {}))
            # One whose wait here failed (its channel ended under it: a command killed
            # the relay) is not known to have ended: the agent's word is taken instead.
            known |= {p.pid for p in self._ended.get(ctx.key, ()) if not p.lost}
            seen = self._seen_ended.setdefault(ctx.key, set())
            if len(seen) > SEEN_ENDED:
                seen.clear()
        for entry in entries:
            if entry.pid in known or (not entry.running and entry.pid in seen):
                continue
            found = described(entry.tag)
            if found is None:
                continue
            config, tag, stdin = found
            handle = self._inside.follow_process(record.sandbox_id, entry)
            process = Process(ctx, config, tag, handle, stdin=stdin and entry.running)
            process.terminal = entry.pty
            try:  # what it printed lately, for ``recent`` and a terminal shown again
                history = self._inside.process_output(
                    record.sandbox_id, entry, max(entry.end - TAIL_BYTES, 0)
                )
            except SiestaError as exc:
                log.debug("the output of process %s could not be read: %s", entry.pid, exc)
                history = []
            process.remember(history)
            with self._lock:
                if entry.pid in self._table.get(ctx.key, {}):
                    continue  # another thread of this instance adopted it meanwhile
                ended = self._ended.get(ctx.key)
                if ended is not None:  # a lost one it replaces
                    for stale in [p for p in ended if p.pid == entry.pid and p.lost]:
                        ended.remove(stale)
                if not entry.running:
                    seen.add(entry.pid)
                    status = f"exit status {entry.exit_code}"
                    error = status if entry.exit_code else None
                    process.mark_ended(Ended(entry.exit_code, True, status, error))
                    self._ended.setdefault(ctx.key, collections.deque(maxlen=KEPT_ENDED)).append(
                        process
                    )
                    continue
                self._table.setdefault(ctx.key, {})[process.pid] = process
            thread = threading.Thread(
                target=self._wait,
                args=(ctx.key, process),
                name=f"process-{process.pid}",
                daemon=True,
            )
            thread.start()

    def output_from(
        self, ctx: CallContext, pid: int, start: int | None, stop: threading.Event
    ) -> Iterator[OutputEvent] | None:
        """The process's output from offset ``start`` (``None``: from now on), read from
        its sandbox's agent with a position of its own: through any instance, and again
        from where a reader was (what the ring still keeps). ``None``: this sandbox's
        processes cannot be read so (an agent older than protocol 3)."""
        record = self._sessions.describe(ctx)
        if record is None or record.status is not SessionStatus.ACTIVE:
            return None
        entries = self._inside.process_table(record.sandbox_id)
        if entries is None:
            return None
        entry = next((e for e in entries if e.pid == pid and described(e.tag)), None)
        if entry is None:
            msg = f"no process with pid {pid} in this conversation's sandbox"
            raise ProcessNotFound(msg, pid=pid)
        begin = entry.end if start is None else start
        return self._inside.stream_output(record.sandbox_id, entry, begin, stop)

    def running(self, ctx: CallContext) -> list[Process]:
        self._adopt(ctx)
        with self._lock:
            table = self._table.get(ctx.key, {})
            return [p for p in table.values() if p.ended is None]

    def listed(self, ctx: CallContext) -> list[Process]:
        """Running processes, then the last ones that ended (oldest first)."""
        self._adopt(ctx)
        with self._lock:
            current = list(self._table.get(ctx.key, {}).values())
            ended = list(self._ended.get(ctx.key, ()))
        just_ended = [p for p in current if p.ended is not None]  # not yet moved over
        return [*(p for p in current if p.ended is None), *ended, *just_ended]

    def get(self, ctx: CallContext, pid: int) -> Process:
        """The process ``pid``, running or among the last that ended."""
        for process in reversed(self.listed(ctx)):
            if process.pid == pid:
                return process
        msg = f"no process with pid {pid} in this conversation's sandbox"
        raise ProcessNotFound(msg, pid=pid)

    def find(self, ctx: CallContext, *, pid: int | None = None, tag: str | None = None) -> Process:
        for process in self.running(ctx):
            if (pid is not None and process.pid == pid) or (tag is not None and process.tag == tag):
                return process
        what = f"pid {pid}" if pid is not None else f"tag {tag!r}"
        msg = f"process with {what} not found"
        raise ProcessNotFound(msg)

    def signal(self, process: Process, signo: int) -> None:
        if signo == signal.SIGKILL:
            process.handle.kill()
        else:
            process.handle.signal(signo)

    def hang_up(self, process: Process) -> None:
        """Its terminal went away: SIGHUP to its process group, as a closed terminal
        window sends, and SIGKILL if it has not ended ``kill_grace_seconds`` later."""
        with contextlib.suppress(SiestaError):
            process.handle.signal(signal.SIGHUP)
        if not process.wait_ended(self.limits.kill_grace_seconds):
            with contextlib.suppress(SiestaError):
                process.handle.kill()

    def forget(self, key: str) -> None:
        """The conversation's sandbox is gone: its processes with it."""
        with self._lock:
            self._table.pop(key, None)
            self._ended.pop(key, None)
            self._seen_ended.pop(key, None)

    def busy_sandboxes(self) -> list[CallContext]:
        """Conversations with processes running (kept out of the idle tiers)."""
        with self._lock:
            return [next(iter(table.values())).ctx for table in self._table.values() if table]

    def keep_running(self) -> None:
        """Mark every running sandbox with a running process as used now, so the idle
        tiers do not freeze a server an agent left running. Never resumes one: a
        sandbox paused on purpose (E2B's auto-pause) stays paused."""
        for ctx in self.busy_sandboxes():
            with contextlib.suppress(SiestaError):
                self._sessions.note_used(ctx)


def as_user(user: str, cwd: str | None, environment: dict[str, str], argv: list[str]) -> list[str]:
    """``argv`` as ``user`` (uid, primary group and groups; ``HOME``, ``USER``, ``PATH``
    of that user), in ``cwd`` (relative: to the home), with ``environment`` added."""
    if cwd is not None and (cwd == "~" or cwd.startswith("~/")):
        cwd = cwd[2:]
    return [
        "/bin/sh",
        "-c",
        BECOME,
        "sh",
        user,
        "/bin/sh",
        "-c",
        CD_AND_RUN,
        "sh",
        cwd or "",
        *(f"{name}={value}" for name, value in environment.items()),
        *argv,
    ]
