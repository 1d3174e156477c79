"""The embedded default store: one SQLite file, for a single service instance.

One connection shared by the service's threads behind a lock; every statement
is short. Leases have the same semantics as in Redis (owner token, TTL, fence
from one growing counter); waiters are woken in-process by a condition
variable, which is enough because this store serves one process.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import astuple
from pathlib import Path

from runtime.store.base import FileKind, FileRecord, SessionRecord, SessionStatus

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    org TEXT NOT NULL, conversation TEXT NOT NULL, session_id TEXT NOT NULL UNIQUE,
    sandbox_id TEXT NOT NULL, image_id TEXT NOT NULL, image_ref TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL, last_used_at REAL NOT NULL,
    generation INTEGER NOT NULL, user TEXT NOT NULL, fence INTEGER NOT NULL,
    PRIMARY KEY (org, conversation)
);
CREATE TABLE IF NOT EXISTS files (
    org TEXT NOT NULL, conversation TEXT NOT NULL, file_id TEXT NOT NULL PRIMARY KEY,
    name TEXT NOT NULL, size INTEGER NOT NULL, content_type TEXT NOT NULL,
    sha256 TEXT NOT NULL, kind TEXT NOT NULL, created_at REAL NOT NULL,
    editable INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS files_by_conversation ON files (org, conversation, created_at);
CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS deleted (key TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS slots (scope TEXT NOT NULL, member TEXT NOT NULL,
                                  PRIMARY KEY (scope, member));
"""

SESSION_COLUMNS = (
    "org, conversation, session_id, sandbox_id, image_id, image_ref, status, "
    "created_at, last_used_at, generation, user, fence"
)
FILE_COLUMNS = (
    "org, conversation, file_id, name, size, content_type, sha256, kind, created_at, editable"
)


class SqliteStore:
    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)
        self._clock = clock
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.executescript(SCHEMA)
            self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        # Stores created before leases existed have sessions without these.
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(sessions)")}
        for name, ddl in (
            ("user", "TEXT NOT NULL DEFAULT ''"),
            ("fence", "INTEGER NOT NULL DEFAULT 0"),
        ):
            if name not in columns:
                self._conn.execute(f"ALTER TABLE sessions ADD COLUMN {name} {ddl}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # -- sessions ----------------------------------------------------------------------

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE org = ? AND conversation = ?",
                (org, conversation),
            ).fetchone()
        return _session(row) if row else None

    def put_session(self, record: SessionRecord) -> bool:
        with self._transaction() as conn:
            stored = conn.execute(
                "SELECT fence FROM sessions WHERE org = ? AND conversation = ?",
                (record.org, record.conversation),
            ).fetchone()
            if stored and stored[0] > record.fence:
                return False
            conn.execute(
                f"INSERT OR REPLACE INTO sessions ({SESSION_COLUMNS}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                astuple(record),
            )
            return True

    def touch_session(
        self, org: str, conversation: str, session_id: str, at: float, fence: int
    ) -> bool:
        with self._lock:
            cursor = self._conn.execute(
                "UPDATE sessions SET last_used_at = ?, fence = ? WHERE org = ? AND "
                "conversation = ? AND session_id = ? AND fence <= ?",
                (at, fence, org, conversation, session_id, fence),
            )
        return cursor.rowcount == 1

    def delete_session(self, org: str, conversation: str, fence: int) -> SessionRecord | None:
        with self._lock:
            row = self._conn.execute(
                f"DELETE FROM sessions WHERE org = ? AND conversation = ? AND fence <= ? "
                f"RETURNING {SESSION_COLUMNS}",
                (org, conversation, fence),
            ).fetchone()
        return _session(row) if row else None

    def list_sessions(self) -> list[SessionRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at"
            ).fetchall()
        return [_session(row) for row in rows]

    # -- leases ----------------------------------------------------------------------

    def acquire_lease(self, key: str, owner: str, ttl: float) -> int | None:
        now = self._clock()
        with self._transaction() as conn:
            held = conn.execute(
                "SELECT owner FROM leases WHERE key = ? AND expires_at > ?", (key, now)
            ).fetchone()
            if held:
                return None
            conn.execute(
                "INSERT OR REPLACE INTO leases (key, owner, expires_at) VALUES (?, ?, ?)",
                (key, owner, now + ttl),
            )
            fence: int = conn.execute(
                "INSERT INTO counters (name, value) VALUES ('fence', 1) "
                "ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value"
            ).fetchone()[0]
            return fence

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        now = self._clock()
        with self._lock:
            cursor = self._conn.execute(
                "UPDATE leases SET expires_at = ? WHERE key = ? AND owner = ? AND expires_at > ?",
                (now + ttl, key, owner, now),
            )
        return cursor.rowcount == 1

    def release_lease(self, key: str, owner: str) -> bool:
        with self._lock:
            cursor = self._conn.execute(
                "DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner)
            )
            self._released.notify_all()
        return cursor.rowcount == 1

    def wait_for_release(self, key: str, timeout: float) -> None:
        with self._lock:
            row = self._conn.execute(
                "SELECT expires_at FROM leases WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                return
            # Wake on a release, or when the holder's TTL runs out (a crashed holder).
            self._released.wait(min(timeout, max(0.0, row[0] - self._clock()) + 0.01))

    def lease_owner(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT owner FROM leases WHERE key = ? AND expires_at > ?", (key, self._clock())
            ).fetchone()
        return str(row[0]) if row else None

    # -- capacity slots --------------------------------------------------------------

    def claim_slot(self, member: str, scopes: list[tuple[str, int]]) -> int | None:
        with self._transaction() as conn:
            for index, (scope, limit) in enumerate(scopes):
                counted = conn.execute(
                    "SELECT 1 FROM slots WHERE scope = ? AND member = ?", (scope, member)
                ).fetchone()
                used = conn.execute(
                    "SELECT COUNT(*) FROM slots WHERE scope = ?", (scope,)
                ).fetchone()[0]
                if not counted and used >= limit:
                    return index
            conn.executemany(
                "INSERT OR IGNORE INTO slots (scope, member) VALUES (?, ?)",
                [(scope, member) for scope, _ in scopes],
            )
            return None

    def release_slot(self, member: str, scopes: list[str]) -> None:
        with self._lock:
            self._conn.executemany(
                "DELETE FROM slots WHERE scope = ? AND member = ?",
                [(scope, member) for scope in scopes],
            )

    def slot_members(self, scope: str) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT member FROM slots WHERE scope = ? ORDER BY member", (scope,)
            ).fetchall()
        return [str(row[0]) for row in rows]

    # -- files -------------------------------------------------------------------------

    def add_file(self, record: FileRecord) -> None:
        with self._lock:
            self._conn.execute(
                f"INSERT INTO files ({FILE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                astuple(record),
            )

    def list_files(self, org: str, conversation: str) -> list[FileRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {FILE_COLUMNS} FROM files WHERE org = ? AND conversation = ? "
                "ORDER BY created_at, rowid",
                (org, conversation),
            ).fetchall()
        return [_file(row) for row in rows]

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {FILE_COLUMNS} FROM files "
                "WHERE org = ? AND conversation = ? AND file_id = ?",
                (org, conversation, file_id),
            ).fetchone()
        return _file(row) if row else None

    def replace_file(self, record: FileRecord) -> bool:
        with self._lock:
            cursor = self._conn.execute(
                "UPDATE files SET size = ?, content_type = ?, sha256 = ? "
                "WHERE org = ? AND conversation = ? AND file_id = ?",
                (
                    record.size,
                    record.content_type,
                    record.sha256,
                    record.org,
                    record.conversation,
                    record.file_id,
                ),
            )
        return cursor.rowcount == 1

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"DELETE FROM files WHERE org = ? AND conversation = ? RETURNING {FILE_COLUMNS}",
                (org, conversation),
            ).fetchall()
        return [_file(row) for row in rows]

    def mark_deleted(self, key: str) -> None:
        with self._lock:
            self._conn.execute("INSERT OR IGNORE INTO deleted (key) VALUES (?)", (key,))

    def deleted_keys(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute("SELECT key FROM deleted ORDER BY key").fetchall()
        return [str(row[0]) for row in rows]

    def clear_deleted(self, key: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM deleted WHERE key = ?", (key,))

    def clear_expired_leases(self) -> int:
        with self._lock:
            cursor = self._conn.execute(
                "DELETE FROM leases WHERE expires_at <= ?", (self._clock(),)
            )
        return cursor.rowcount

    def ping(self) -> None:
        with self._lock:
            self._conn.execute("SELECT 1")

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _session(row: tuple[object, ...]) -> SessionRecord:
    org, conv, sid, sbx, image_id, image_ref, status, created, used, gen, user, fence = row
    return SessionRecord(
        org=str(org),
        conversation=str(conv),
        session_id=str(sid),
        sandbox_id=str(sbx),
        image_id=str(image_id),
        image_ref=str(image_ref),
        status=SessionStatus(str(status)),
        created_at=float(str(created)),
        last_used_at=float(str(used)),
        generation=int(str(gen)),
        user=str(user),
        fence=int(str(fence)),
    )


def _file(row: tuple[object, ...]) -> FileRecord:
    org, conv, file_id, name, size, content_type, sha256, kind, created, editable = row
    return FileRecord(
        org=str(org),
        conversation=str(conv),
        file_id=str(file_id),
        name=str(name),
        size=int(str(size)),
        content_type=str(content_type),
        sha256=str(sha256),
        kind=FileKind(str(kind)),
        created_at=float(str(created)),
        editable=bool(editable),
    )
