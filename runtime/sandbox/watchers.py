"""Watchers any instance serves: a watcher's events read from its sandbox's agent.

A watcher is ``siesta-fs watch`` running in the sandbox; where the agent keeps a
process table (protocol 3) it runs with a ring of its events (the watcher's byte
limit) and a tag that names it. Reading its new events, from whichever instance,
reads the ring from the process's TAKE cursor and moves the cursor past what was
read: each event is read once, whatever instance the reads land on. Where the agent
keeps no table, the instance that made the watcher is the only one that has it
(``Watcher``'s own buffer, below).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.context import CallContext
from runtime.core.errors import FileMissing, InvalidRequest, NotADirectory, SiestaError
from runtime.core.output import HeadTailBuffer
from runtime.core.records import SessionStatus
from runtime.sandbox.user_files import UnknownUser
from runtime.seams.providers import (
    MAX_PROCESS_TAG_BYTES,
    ProcessEntry,
    RunningProcess,
    SandboxInside,
)
from runtime.sessions.manager import SessionManager

KIND = "watcher"
EVENT_KINDS = frozenset({"create", "write", "remove", "rename", "chmod"})
WATCH_START_SECONDS = 30.0
WATCHER_IDLE_SECONDS = 300.0
"""A watcher whose events nobody asked for this long is stopped."""
MAX_KEPT_CHANGES = 100_000
"""Events kept for a watcher nobody reads (the rest are dropped), whatever their bytes."""
CHANGE_OVERHEAD_BYTES = 64
"""What one kept change counts for besides its name's bytes, so that many short names
are bounded by the byte limit as well as long ones."""
PENDING_LIMIT = 8192
"""The most of one event record kept until its end comes (``siesta-fs`` caps at PATH_MAX)."""


@dataclass(frozen=True)
class Parsed:
    changes: list[tuple[str, str]]
    """(kind, name) in order."""
    overflows: int
    ready: bool
    consumed: int
    """Bytes of whole records (a record cut by the end of what was read waits)."""


def parse_records(data: bytes) -> Parsed:
    """``siesta-fs watch``'s records (``KIND\\tNAME\\0``)."""
    end = data.rfind(b"\0") + 1
    changes: list[tuple[str, str]] = []
    overflows = 0
    ready = False
    for line in data[:end].split(b"\0")[:-1]:
        kind, _, name = line.decode("utf-8", errors="surrogateescape").partition("\t")
        if kind == "ready":
            ready = True
        elif kind == "overflow":
            overflows += 1
        elif kind in EVENT_KINDS:
            changes.append((kind, name))
    return Parsed(changes, overflows, ready, end)


def watcher_tag(watcher_id: str, path: str, *, include_entry: bool = False) -> str:
    """What names a watcher in the sandbox's process table: its id, and the folder and
    ``include_entry`` any instance needs to read its events' entries."""
    fields: dict[str, object] = {"kind": KIND, "id": watcher_id, "path": path}
    if include_entry:
        fields["entry"] = True
    text = json.dumps(fields, separators=(",", ":"))
    if len(text.encode()) > MAX_PROCESS_TAG_BYTES:  # a path of thousands of bytes
        del fields["path"]  # (its events are read elsewhere without entries)
        text = json.dumps(fields, separators=(",", ":"))
    return text


def tag_fields(entry: ProcessEntry) -> dict[str, object]:
    """A watcher's tag (``watcher_tag``); empty for any other process."""
    try:
        fields = json.loads(entry.tag)
    except ValueError:
        return {}
    if not isinstance(fields, dict) or fields.get("kind") != KIND:
        return {}
    return fields


def _watcher_id(entry: ProcessEntry) -> str | None:
    found = tag_fields(entry).get("id")
    return found if isinstance(found, str) else None


class SharedWatchers:
    def __init__(self, sessions: SessionManager, inside: SandboxInside) -> None:
        self._sessions = sessions
        self._inside = inside

    def _sandbox(self, ctx: CallContext) -> str | None:
        record = self._sessions.describe(ctx)
        if record is None or record.status is not SessionStatus.ACTIVE:
            return None
        return record.sandbox_id

    def running(self, ctx: CallContext) -> dict[str, ProcessEntry] | None:
        """The sandbox's running watchers by id; ``None``: its agent keeps no table this
        instance can ask (or it does not run)."""
        sandbox_id = self._sandbox(ctx)
        if sandbox_id is None:
            return None
        try:
            entries = self._inside.process_table(sandbox_id)
        except SiestaError:
            return None
        if entries is None:
            return None
        found = {}
        for entry in entries:
            watcher_id = _watcher_id(entry)
            if watcher_id is not None and entry.running:
                found[watcher_id] = entry
        return found

    def reader(self, ctx: CallContext, entry: ProcessEntry) -> Callable[[], Parsed]:
        """Reads the watcher's new records once, through any instance."""

        def take() -> Parsed:
            sandbox_id = self._sandbox(ctx)
            if sandbox_id is None:
                return Parsed([], 0, False, 0)
            current = {e.pid: e for e in self._inside.process_table(sandbox_id) or []}
            now = current.get(entry.pid, entry)
            lost, pieces = self._inside.untaken_output(sandbox_id, now)
            data = b"".join(piece for _, piece in pieces)
            parsed = parse_records(data)
            if parsed.consumed:
                self._inside.take_output(sandbox_id, now, _offset_after(pieces, parsed.consumed))
            if lost:  # changes the ring no longer kept: counted as one, as an overflow is
                return dataclasses.replace(parsed, overflows=parsed.overflows + 1)
            return parsed

        return take

    def stop(self, ctx: CallContext, entry: ProcessEntry) -> None:
        sandbox_id = self._sandbox(ctx)
        if sandbox_id is not None:
            self._inside.follow_process(sandbox_id, entry).kill()


def _offset_after(pieces: list[tuple[int, bytes]], consumed: int) -> int:
    """The output offset right after the first ``consumed`` bytes of ``pieces``."""
    left = consumed
    for offset, piece in pieces:
        if left <= len(piece):
            return offset + left
        left -= len(piece)
    last_offset, last = pieces[-1]
    return last_offset + len(last)


@dataclass(frozen=True)
class Change:
    """One watch event: ``create``, ``write``, ``remove`` or ``chmod`` of ``name``
    (relative to the watched folder)."""

    kind: str
    name: str


@dataclass(frozen=True)
class Changes:
    """What a watcher kept since the last read, and how many it could not keep."""

    changes: list[Change]
    dropped: int
    """Changes lost since the last read: more came than ``limit_bytes`` keeps unread (or
    the kernel's inotify queue overflowed: counted as one, it says not how many)."""
    limit_bytes: int
    """The watcher's limit (``SIESTA_PROCESSES__MAX_WATCHER_BYTES``)."""


class Watcher:
    """``siesta-fs watch`` running in the sandbox; its events kept until taken, up to
    ``max_bytes`` (names a sandbox makes up: up to 4 KiB each): the newer ones past it
    are dropped and counted, never kept."""

    def __init__(
        self,
        process: RunningProcess | None,
        owner: str,
        path: str,
        max_bytes: int,
        *,
        watcher_id: str | None = None,
        include_entry: bool = False,
    ) -> None:
        self.id = watcher_id or uuid.uuid4().hex
        self.owner = owner
        """The key of the conversation whose sandbox it watches."""
        self.path = path
        """The folder as it was asked for (relative ones: to the caller's folder)."""
        self.include_entry = include_entry
        """Its events are read with the entries of what they name."""
        self._process = process
        self._changes: list[Change] = []
        self._kept_bytes = 0
        self._dropped = 0
        self._max_bytes = max_bytes
        self._pending = b""
        self._stderr = HeadTailBuffer(2048)
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._taken_at = time.monotonic()
        self.failure: str | None = None
        self._shared: Callable[[], Parsed] | None = None
        self._stop_elsewhere: Callable[[], None] | None = None

    def share(self, read: Callable[[], Parsed]) -> None:
        """Its events are read from the sandbox (``read``), as every instance reads them,
        not from what this instance's own follow of it keeps."""
        self._shared = read

    @classmethod
    def elsewhere(
        cls,
        watcher_id: str,
        owner: str,
        max_bytes: int,
        read: Callable[[], Parsed],
        stop: Callable[[], None],
        *,
        path: str = "",
        include_entry: bool = False,
    ) -> Watcher:
        """A watcher another instance made, read through the sandbox's agent."""
        watcher = cls(None, owner, path, max_bytes, watcher_id=watcher_id)
        watcher.include_entry = include_entry
        watcher.share(read)
        watcher._stop_elsewhere = stop
        return watcher

    def start(self) -> None:
        """Returns once the folder is watched; raises what the watch failed with."""
        assert self._process is not None
        threading.Thread(target=self._run, name=f"e2b-watch-{self.id[:8]}", daemon=True).start()
        self._ready.wait(WATCH_START_SECONDS)
        if self.failure is not None or not self._ready.is_set():
            self.stop()
            raise self._error()

    def _error(self) -> SiestaError:
        stderr = self._stderr.result().text
        if stderr.startswith("setpriv:"):
            msg = f"the sandbox cannot run as that user: {stderr.strip()[-300:]}"
            return UnknownUser(msg)
        code = _status(stderr)
        if code == "not_found":
            msg = f"{self.path!r} does not exist"
            return FileMissing(msg, path=self.path)
        if code == "not_a_directory":
            msg = f"{self.path!r} is not a directory"
            return NotADirectory(msg, path=self.path)
        if code == "network_mount":
            msg = (
                f"cannot watch {self.path!r}: it is on a network file system (NFS, CIFS, SMB, "
                "FUSE), whose changes may never be seen; allow network mounts to watch it anyway"
            )
            return InvalidRequest(msg, path=self.path)
        msg = f"{self.path!r} cannot be watched: {self.failure or 'no answer'}"
        return InvalidRequest(msg, path=self.path)

    def _run(self) -> None:
        assert self._process is not None
        try:
            self._process.wait(self._output)
        except SiestaError as exc:
            self.failure = str(exc)
        finally:
            if self.failure is None:
                self.failure = self._stderr.result().text.strip()[-300:] or "the watch ended"
            self._ended.set()
            self._ready.set()

    def _output(self, stream: str, data: bytes) -> None:
        if stream != "stdout":
            self._stderr.write(data)
            return
        records = (self._pending + data).split(b"\0")
        self._pending = records.pop()[-PENDING_LIMIT:]  # a name is at most PATH_MAX
        for line in records:
            kind, _, name = line.decode("utf-8", errors="surrogateescape").partition("\t")
            if kind == "ready":
                self._ready.set()
            elif kind == "overflow":
                with self._lock:
                    self._dropped += 1
            elif kind in EVENT_KINDS:
                self._keep(Change(kind, name), len(line))

    def _keep(self, change: Change, size: int) -> None:
        if self._shared is not None:
            return  # read from the sandbox instead
        cost = size + CHANGE_OVERHEAD_BYTES
        with self._lock:
            full = len(self._changes) >= MAX_KEPT_CHANGES
            if full or self._kept_bytes + cost > self._max_bytes:
                self._dropped += 1
                return
            self._changes.append(change)
            self._kept_bytes += cost

    def stop(self) -> None:
        if self._stop_elsewhere is not None:
            self._stop_elsewhere()
        elif self._process is not None and not self._ended.is_set():
            self._process.kill()  # its wait thread then ends and lets go of it

    def take(self) -> Changes:
        if self._shared is not None:
            parsed = self._shared()
            self._taken_at = time.monotonic()
            changes = [Change(kind, name) for kind, name in parsed.changes]
            return Changes(changes, parsed.overflows, self._max_bytes)
        with self._lock:
            changes, self._changes = self._changes, []
            dropped, self._dropped = self._dropped, 0
            self._kept_bytes = 0
            self._taken_at = time.monotonic()
        return Changes(changes, dropped, self._max_bytes)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def forgotten(self, idle_seconds: float) -> bool:
        """Nobody took its changes for ``idle_seconds`` (or it has ended). One read
        through the sandbox is never idle here: other instances may be reading it; it
        ends when removed (through any instance) or with its sandbox."""
        if self._shared is not None:
            return self.ended
        return self.ended or time.monotonic() - self._taken_at > idle_seconds


def _status(stderr: str) -> str:
    """The code of ``siesta-fs``'s last status line (``siesta-fs: CODE detail``)."""
    lines = [line for line in stderr.splitlines() if line.startswith("siesta-fs: ")]
    return lines[-1].split()[1] if lines and len(lines[-1].split()) > 1 else "missing"
