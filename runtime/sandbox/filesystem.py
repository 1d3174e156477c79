"""File system operations anywhere in a sandbox (stat, list, make, move, remove,
watch), for E2B's ``filesystem.Filesystem`` and ``/v1``'s file system routes.

Like reads and writes (``user_files.py``), each is a small shell program run as the
call's user, so the kernel decides what that user may touch; ``find -printf``
describes entries in one line each. Paths are made absolute against the working
directory (the user's home for E2B, the workspace for ``/v1``) without following
symlinks (``realpath -s``), as envd shows them.

Each entry comes with its metadata (``user.e2b.*`` xattrs, ``metadata.py``):
``siesta-fs entries`` runs the ``find`` and puts each entry's metadata before it.

Watching runs ``siesta-fs watch`` (inotify; in every catalog image) in the
sandbox as the user, and keeps its events until a reader takes them. A watcher made
with ``include_entry`` has the entries of what was made, written or chmod-ed read
with its events (envd's, best-effort: a name gone since has none).
"""

from __future__ import annotations

import posixpath
import threading
import time
import uuid
from dataclasses import dataclass, field

from runtime.core.errors import (
    InvalidRequest,
    NotADirectory,
    NotFound,
    TransferTooLarge,
)
from runtime.sandbox import metadata
from runtime.sandbox.metadata import HELPER
from runtime.sandbox.user_files import (
    AsUser,
    UserFiles,
    check_exit,
)
from runtime.sandbox.watchers import (
    WATCHER_IDLE_SECONDS,
    Change,
    SharedWatchers,
    Watcher,
    tag_fields,
    watcher_tag,
)
from runtime.seams.providers import ProcessEntry

ENTRY_FORMAT = r"%y\t%Y\t%s\t%m\t%M\t%u\t%g\t%T@\t%l\t%p\0"
"""type, type followed, size, mode (octal), permissions, owner, group, mtime, link, path
(after the ninth tab); ``siesta-fs entries`` puts the metadata and a tab before each."""
ENTRIES = "@ENTRIES@"
"""Stands for ``siesta-fs entries`` with the deployment's metadata limits (``_scripts``)."""
RESOLVE = 'p=$(realpath -s -m -- "$1")'
STAT = (
    RESOLVE + '; test -e "$p" || test -L "$p" || exit 3; '
    f'exec {ENTRIES} find "$p" -maxdepth 0 -printf "$2"'
)
LIST = (
    RESOLVE + '; test -e "$p" || exit 3; test -d "$p" || exit 8; '
    f'exec {ENTRIES} find "$p" -mindepth 1 -maxdepth "$3" -printf "$2"'
)
MAKE_DIR = (
    RESOLVE + '; if test -d "$p"; then exit 7; fi; if test -e "$p"; then exit 9; fi; '
    f'mkdir -p -- "$p" && exec {ENTRIES} find "$p" -maxdepth 0 -printf "$2"'
)
MOVE = (
    's=$(realpath -s -m -- "$1"); d=$(realpath -s -m -- "$3"); '
    'test -e "$s" || test -L "$s" || exit 3; mkdir -p -- "$(dirname -- "$d")" && '
    '{ test "$s" = "$d" || mv -T -- "$s" "$d"; } && '
    f'exec {ENTRIES} find "$d" -maxdepth 0 -printf "$2"'
)
SET_METADATA = (
    RESOLVE + '; test -e "$p" || exit 3; test -d "$p" && exit 4; f=$2; shift 2; '
    f'{HELPER} setmeta "$p" "$@" || exit; exec {ENTRIES} find "$p" -maxdepth 0 -printf "$f"'
)
"""Replaces a file's metadata (``setmeta``: keys not given are removed), then says what
it has. Files only: envd keeps metadata on what it uploads."""
EVENT_ENTRIES = (
    RESOLVE + '; case $p in */) ;; *) p=$p/;; esac; printf "%s\\0" "$p"; '
    'exec xargs -0 -r sh -c "$3" sh "$p" "$2"'
)
"""The watched folder (resolved, printed first), then the entry of each name on stdin
that is there: ``EACH_ENTRY`` as many times as ``xargs`` needs."""
EACH_ENTRY = (
    'p=$1; f=$2; shift 2; for n; do set -- "$@" "$p$n"; shift; done; '
    f'exec {ENTRIES} find "$@" -maxdepth 0 -printf "$f"'
)
REMOVE = RESOLVE + '; exec rm -rf -- "$p"'
SINGLE_ENTRY_LIMIT = 64 * 1024
"""What one entry's line (stat, make, move) may take besides its metadata: its path is
at most 4 KiB."""
MAX_DEPTH = 64
WATCH = f'p=$(realpath -s -m -- "$1"); exec {HELPER} watch "$p" "$2" "$3"'
"""inotify in the sandbox (``siesta-fs watch``), as the user: what it may read it may watch."""
KINDS = {"f": "file", "d": "directory", "l": "symlink"}
ENTRY_KINDS = frozenset({"create", "write", "chmod"})
"""Changes whose name is expected to still be there (envd's ``opCarriesEntry``)."""


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
    metadata: dict[str, str] = field(default_factory=dict)
    """Its ``user.e2b.*`` xattrs, the prefix left out (of what a symlink points to)."""

    @property
    def is_symlink(self) -> bool:
        return self.symlink_target is not None


def parse_entries(data: bytes) -> list[Entry]:
    entries = []
    for record in data.split(b"\0"):
        if not record:
            continue
        encoded, _, record = record.partition(b"\t")
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
                symlink_target=_absolute_target(path, link) if own == "l" else None,
                metadata=metadata.decode(encoded),
            )
        )
    return entries


def _absolute_target(path: str, link: str) -> str:
    """Where a symlink points, as an absolute path (envd shows it so): a relative link
    is taken from the link's own folder."""
    if link.startswith("/"):
        return posixpath.normpath(link)
    return posixpath.normpath(posixpath.join(posixpath.dirname(path), link))


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


REMOVAL_WAIT_SECONDS = 5.0
"""How long removing a watcher waits for the sandbox's agent to list it as ended."""


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
        self._meta = files.metadata_limits
        self._entry_limit = SINGLE_ENTRY_LIMIT + self._meta.encoded_bytes

    def _script(self, script: str) -> str:
        meta = self._meta
        return script.replace(ENTRIES, f"{HELPER} entries 9 {meta.max_bytes} {meta.max_keys}")

    def _entries(self, who: AsUser, script: str, *args: str, listing: bool = False) -> list[Entry]:
        path = args[0]
        limits = self._limits
        try:
            code, stdout, stderr = self._files.run_script(
                who,
                self._script(script),
                *args,
                limit=limits.max_listing_bytes if listing else self._entry_limit,
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

    def set_metadata(self, who: AsUser, path: str, file_metadata: dict[str, str]) -> Entry:
        """Replace the file's metadata (an empty map clears it); checked against the
        limits first."""
        metadata.check(file_metadata, self._meta)
        pairs = metadata.pairs(file_metadata)
        return self._entries(who, SET_METADATA, path, ENTRY_FORMAT, *pairs)[0]

    def event_entries(
        self, who: AsUser, watcher: Watcher, changes: list[Change]
    ) -> dict[str, Entry]:
        """The entries of the names made, written or chmod-ed, as they are now, for a
        watcher made with ``include_entry`` (envd's, best-effort: a name gone since, or
        past the listing limits, has none)."""
        if not watcher.include_entry or not watcher.path:
            return {}
        wanted = dict.fromkeys(c.name for c in changes if c.kind in ENTRY_KINDS and c.name)
        names = list(wanted)[: self._limits.max_listing_entries]
        if not names:
            return {}
        stdin = b"".join(name.encode(errors="surrogateescape") + b"\0" for name in names)
        each = self._script(EACH_ENTRY)
        try:
            _, stdout, _ = self._files.run_script(
                who,
                EVENT_ENTRIES,
                watcher.path,
                ENTRY_FORMAT,
                each,
                limit=self._limits.max_listing_bytes,
                max_records=len(names) + 1,
                stdin=stdin,
            )
        except TransferTooLarge:
            return {}
        root, _, records = stdout.partition(b"\0")
        by_path = {entry.path: entry for entry in parse_entries(records)}
        folder = root.decode(errors="surrogateescape")
        return {name: by_path[folder + name] for name in names if folder + name in by_path}

    # -- watching ----------------------------------------------------------------------

    def create_watcher(
        self,
        who: AsUser,
        path: str,
        recursive: bool,
        *,
        include_entry: bool = False,
        allow_network_mounts: bool = False,
    ) -> Watcher:
        """Watching ``path`` when this returns (events from then on are kept). A folder
        on a network file system (NFS, CIFS, SMB, FUSE), whose changes may never be
        seen, only with ``allow_network_mounts`` (envd's rule)."""
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
        tag = watcher_tag(watcher_id, path, include_entry=include_entry)
        ring = self._limits.max_watcher_bytes
        flags = ("1" if recursive else "0", "1" if allow_network_mounts else "0")
        process = self._files.start_program(who, WATCH, path, *flags, kept=(ring, tag))
        watcher = Watcher(
            process, who.ctx.key, path, ring, watcher_id=watcher_id, include_entry=include_entry
        )
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
        fields = tag_fields(entry)
        path = fields.get("path")
        return Watcher.elsewhere(
            watcher_id,
            who.ctx.key,
            self._limits.max_watcher_bytes,
            shared_watchers.reader(who.ctx, entry),
            lambda: shared_watchers.stop(who.ctx, entry),
            path=path if isinstance(path, str) else "",
            include_entry=fields.get("entry") is True,
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
        """Stopped, and gone from the sandbox's process table before this returns (up to
        ``REMOVAL_WAIT_SECONDS``): the watch is killed at once, but the agent lists it as
        running until it has reaped it, and a lookup meanwhile (through any instance)
        would find it again."""
        watcher = self.watcher(who, watcher_id)
        with self._lock:
            self._watchers.pop(watcher_id, None)
        watcher.stop()
        if self._shared is None:
            return
        deadline = time.monotonic() + REMOVAL_WAIT_SECONDS
        while time.monotonic() < deadline:
            running = self._shared.running(who.ctx)
            if running is None or watcher_id not in running:
                return
            time.sleep(0.05)
