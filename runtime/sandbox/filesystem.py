"""File system operations anywhere in a sandbox (stat, list, make, move, remove,
watch), for E2B's ``filesystem.Filesystem`` and ``/v1``'s file system routes.

Like reads and writes (``user_files.py``), each is a small shell program run as the
call's user, so the kernel decides what that user may touch; ``find -printf``
describes entries in one line each. Paths are made absolute against the working
directory (the user's home for E2B, the workspace for ``/v1``) without following
symlinks (``realpath -s``), as envd shows them.

Watching runs ``siesta-fs watch`` (inotify; in every catalog image) in the
sandbox as the user, and keeps its events until a reader takes them.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.errors import (
    FileMissing,
    InvalidRequest,
    NotADirectory,
    NotFound,
    SiestaError,
    TransferTooLarge,
)
from runtime.core.output import HeadTailBuffer
from runtime.sandbox.user_files import (
    AsUser,
    UnknownUser,
    UserFiles,
    check_exit,
)
from runtime.sandbox.watchers import Parsed, SharedWatchers, watcher_tag
from runtime.seams.providers import ProcessEntry, RunningProcess

ENTRY_FORMAT = r"%y\t%Y\t%s\t%m\t%M\t%u\t%g\t%T@\t%l\t%p\0"
"""type, type followed, size, mode (octal), permissions, owner, group, mtime, link, path."""
RESOLVE = 'p=$(realpath -s -m -- "$1")'
STAT = RESOLVE + '; test -e "$p" || test -L "$p" || exit 3; exec find "$p" -maxdepth 0 -printf "$2"'
LIST = (
    RESOLVE + '; test -e "$p" || exit 3; test -d "$p" || exit 8; '
    'exec find "$p" -mindepth 1 -maxdepth "$3" -printf "$2"'
)
MAKE_DIR = (
    RESOLVE + '; if test -d "$p"; then exit 7; fi; if test -e "$p"; then exit 9; fi; '
    'mkdir -p -- "$p" && exec find "$p" -maxdepth 0 -printf "$2"'
)
MOVE = (
    's=$(realpath -s -m -- "$1"); d=$(realpath -s -m -- "$3"); '
    'test -e "$s" || test -L "$s" || exit 3; mkdir -p -- "$(dirname -- "$d")" && '
    '{ test "$s" = "$d" || mv -T -- "$s" "$d"; } && exec find "$d" -maxdepth 0 -printf "$2"'
)
REMOVE = RESOLVE + '; exec rm -rf -- "$p"'
SINGLE_ENTRY_LIMIT = 64 * 1024
"""What one entry's line (stat, make, move) may take: its path is at most 4 KiB."""
MAX_DEPTH = 64
WATCH = 'p=$(realpath -s -m -- "$1"); exec /usr/local/lib/siesta/siesta-fs watch "$p" "$2"'
"""inotify in the sandbox (``siesta-fs watch``), as the user: what it may read it may watch."""
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
EVENT_KINDS = frozenset({"create", "write", "remove", "rename", "chmod"})

KINDS = {"f": "file", "d": "directory", "l": "symlink"}


class AlreadyExists(InvalidRequest):
    code = "already_exists"


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    """``file``, ``directory`` or ``other`` (of what a symlink points to)."""
    path: str
    size: int
    mode: int
    permissions: str
    owner: str
    group: str
    modified: float
    symlink_target: str | None

    @property
    def is_symlink(self) -> bool:
        return self.symlink_target is not None


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


def parse_entries(data: bytes) -> list[Entry]:
    entries = []
    for record in data.split(b"\0"):
        if not record:
            continue
        fields = record.decode("utf-8", errors="surrogateescape").split("\t", 9)
        if len(fields) != 10:
            continue
        own, followed, size, mode, permissions, owner, group, mtime, link, path = fields
        kind = KINDS.get(followed if own == "l" else own, "other")
        entries.append(
            Entry(
                name=path.rstrip("/").rsplit("/", 1)[-1] or "/",
                kind="other" if kind == "symlink" else kind,
                path=path,
                size=int(size),
                mode=int(mode, 8),
                permissions=permissions,
                owner=owner,
                group=group,
                modified=float(mtime),
                symlink_target=link if own == "l" else None,
            )
        )
    return entries


class TooManyWatchers(InvalidRequest):
    code = "too_many_watchers"


@dataclass(frozen=True)
class FsLimits:
    max_watchers: int
    """Folders watched at once per sandbox (``SIESTA_PROCESSES__MAX_WATCHERS_PER_SANDBOX``)."""
    max_watcher_bytes: int
    """Changes one watcher keeps unread (``SIESTA_PROCESSES__MAX_WATCHER_BYTES``)."""
    max_listing_bytes: int
    """Bytes a listing may take from the sandbox (``SIESTA_FILES__MAX_LISTING_BYTES``)."""
    max_listing_entries: int
    """Entries a listing may have (``SIESTA_FILES__MAX_LISTING_ENTRIES``)."""


def _too_large(exc: TransferTooLarge, path: str) -> TransferTooLarge:
    """The refusal of a listing past one of its limits, naming the setting: a sandbox
    decides what its ``find`` prints, the service how much of it it takes."""
    limit, unit = exc.fields.get("limit"), exc.fields.get("unit")
    setting = "MAX_LISTING_ENTRIES" if unit == "entries" else "MAX_LISTING_BYTES"
    msg = (
        f"the listing of {path!r} is over {limit} {unit}, the limit (SIESTA_FILES__{setting}); "
        "list a folder further down, or with a smaller depth"
    )
    return TransferTooLarge(msg, limit=limit, unit=unit, path=path)


class SandboxFilesystem:
    def __init__(
        self, files: UserFiles, limits: FsLimits, shared: SharedWatchers | None = None
    ) -> None:
        self._files = files
        self._limits = limits
        self._shared = shared
        """Watchers in the sandbox's process table, which any instance reads."""
        self._watchers: dict[str, Watcher] = {}
        self._lock = threading.Lock()

    def _entries(self, who: AsUser, script: str, *args: str, listing: bool = False) -> list[Entry]:
        path = args[0]
        limits = self._limits
        try:
            code, stdout, stderr = self._files.run_script(
                who,
                script,
                *args,
                limit=limits.max_listing_bytes if listing else SINGLE_ENTRY_LIMIT,
                max_records=limits.max_listing_entries if listing else 1,
            )
        except TransferTooLarge as exc:
            raise _too_large(exc, path) from exc
        if code == 7:
            msg = f"{path!r} already exists"
            raise AlreadyExists(msg, path=path)
        if code == 8:
            msg = f"{path!r} is not a directory"
            raise NotADirectory(msg, path=path)
        if code == 9:
            msg = f"{path!r} exists and is not a directory"
            raise InvalidRequest(msg, path=path)
        check_exit(code, stderr, path)
        return parse_entries(stdout)

    def stat(self, who: AsUser, path: str) -> Entry:
        return self._entries(who, STAT, path, ENTRY_FORMAT)[0]

    def list_dir(self, who: AsUser, path: str, depth: int) -> list[Entry]:
        if depth < 1:
            msg = "depth must be at least 1"
            raise InvalidRequest(msg)
        depth_text = str(min(depth, MAX_DEPTH))
        found = self._entries(who, LIST, path, ENTRY_FORMAT, depth_text, listing=True)
        return sorted(found, key=lambda entry: entry.path)

    def make_dir(self, who: AsUser, path: str) -> Entry:
        return self._entries(who, MAKE_DIR, path, ENTRY_FORMAT)[0]

    def move(self, who: AsUser, source: str, destination: str) -> Entry:
        return self._entries(who, MOVE, source, ENTRY_FORMAT, destination)[0]

    def remove(self, who: AsUser, path: str) -> None:
        self._entries(who, REMOVE, path)

    # -- watching ----------------------------------------------------------------------

    def create_watcher(self, who: AsUser, path: str, recursive: bool) -> Watcher:
        """Watching ``path`` when this returns (events from then on are kept)."""
        shared = self._shared.running(who.ctx) if self._shared is not None else None
        with self._lock:
            watching = sum(1 for w in self._watchers.values() if w.owner == who.ctx.key)
        if shared is not None:
            watching = len(shared)  # every instance's
        if watching >= self._limits.max_watchers:
            limit = self._limits.max_watchers
            msg = (
                f"{limit} folders are watched in this sandbox already, the limit "
                "(SIESTA_PROCESSES__MAX_WATCHERS_PER_SANDBOX); remove a watcher first"
            )
            raise TooManyWatchers(msg, limit=limit)
        watcher_id = uuid.uuid4().hex
        tag = watcher_tag(watcher_id, path)
        ring = self._limits.max_watcher_bytes
        process = self._files.start_program(
            who, WATCH, path, "1" if recursive else "0", kept=(ring, tag)
        )
        watcher = Watcher(process, who.ctx.key, path, ring, watcher_id=watcher_id)
        if shared is not None and self._shared is not None:
            entry = ProcessEntry(process.pid, running=True, exit_code=0, pty=False, tag=tag)
            watcher.share(self._shared.reader(who.ctx, entry))
        watcher.start()
        with self._lock:
            self._watchers[watcher.id] = watcher
        return watcher

    def watcher(self, who: AsUser, watcher_id: str) -> Watcher:
        with self._lock:
            watcher = self._watchers.get(watcher_id)
        if watcher is not None and watcher.owner == who.ctx.key:
            return watcher
        shared = self._shared.running(who.ctx) if self._shared is not None else None
        entry = shared.get(watcher_id) if shared is not None else None
        if entry is None or self._shared is None:  # (another conversation's: not found)
            msg = f"watcher {watcher_id} not found"
            raise NotFound(msg)
        shared_watchers = self._shared
        return Watcher.elsewhere(
            watcher_id,
            who.ctx.key,
            self._limits.max_watcher_bytes,
            shared_watchers.reader(who.ctx, entry),
            lambda: shared_watchers.stop(who.ctx, entry),
        )

    def sweep(self, idle_seconds: float = WATCHER_IDLE_SECONDS) -> None:
        """Stop the watchers nobody reads any more (a client that went away)."""
        with self._lock:
            gone = [w for w in self._watchers.values() if w.forgotten(idle_seconds)]
            for watcher in gone:
                del self._watchers[watcher.id]
        for watcher in gone:
            watcher.stop()

    def remove_watcher(self, who: AsUser, watcher_id: str) -> None:
        watcher = self.watcher(who, watcher_id)
        with self._lock:
            self._watchers.pop(watcher_id, None)
        watcher.stop()


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
    ) -> None:
        self.id = watcher_id or uuid.uuid4().hex
        self.owner = owner
        """The key of the conversation whose sandbox it watches."""
        self._path = path
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
    ) -> Watcher:
        """A watcher another instance made, read through the sandbox's agent."""
        watcher = cls(None, owner, "", max_bytes, watcher_id=watcher_id)
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
            msg = f"{self._path!r} does not exist"
            return FileMissing(msg, path=self._path)
        if code == "not_a_directory":
            msg = f"{self._path!r} is not a directory"
            return NotADirectory(msg, path=self._path)
        msg = f"{self._path!r} cannot be watched: {self.failure or 'no answer'}"
        return InvalidRequest(msg, path=self._path)

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
