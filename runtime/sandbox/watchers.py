"""Watchers any instance serves: a watcher's events read from its sandbox's agent.

A watcher is ``siesta-fs watch`` running in the sandbox; where the agent keeps a
process table (protocol 3) it runs with a ring of its events (the watcher's byte
limit) and a tag that names it. Reading its new events, from whichever instance,
reads the ring from the process's TAKE cursor and moves the cursor past what was
read: each event is read once, whatever instance the reads land on. Where the agent
keeps no table, the instance that made the watcher is the only one that has it
(``filesystem.Watcher``'s own buffer).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.core.records import SessionStatus
from runtime.seams.providers import MAX_PROCESS_TAG_BYTES, ProcessEntry, SandboxInside
from runtime.sessions.manager import SessionManager

KIND = "watcher"
EVENT_KINDS = frozenset({"create", "write", "remove", "rename", "chmod"})


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


def watcher_tag(watcher_id: str, path: str) -> str:
    text = json.dumps({"kind": KIND, "id": watcher_id, "path": path}, separators=(",", ":"))
    if len(text.encode()) > MAX_PROCESS_TAG_BYTES:  # a path of thousands of bytes
        text = json.dumps({"kind": KIND, "id": watcher_id}, separators=(",", ":"))
    return text


def _watcher_id(entry: ProcessEntry) -> str | None:
    try:
        fields = json.loads(entry.tag)
    except ValueError:
        return None
    if not isinstance(fields, dict) or fields.get("kind") != KIND:
        return None
    found = fields.get("id")
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
