"""The embedded default store: one SQLite file under the data directory.

One connection shared by the service's threads behind a lock; every statement
is short, so the lock is never held for long. WAL mode keeps readers of the
file from other processes (the CLI, tests) from blocking the service.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from runtime.store.base import FileKind, FileRecord, SessionRecord, SessionStatus

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    org           TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    session_id    TEXT NOT NULL UNIQUE,
    sandbox_id    TEXT NOT NULL,
    image_id      TEXT NOT NULL,
    image_ref     TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    REAL NOT NULL,
    last_used_at  REAL NOT NULL,
    generation    INTEGER NOT NULL,
    PRIMARY KEY (org, conversation)
);
CREATE TABLE IF NOT EXISTS files (
    org           TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    file_id       TEXT NOT NULL PRIMARY KEY,
    name          TEXT NOT NULL,
    size          INTEGER NOT NULL,
    content_type  TEXT NOT NULL,
    sha256        TEXT NOT NULL,
    kind          TEXT NOT NULL,
    created_at    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS files_by_conversation ON files (org, conversation, created_at);
"""

FILE_COLUMNS = "org, conversation, file_id, name, size, content_type, sha256, kind, created_at"

COLUMNS = (
    "org, conversation, session_id, sandbox_id, image_id, image_ref, status, "
    "created_at, last_used_at, generation"
)


class SqliteStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.executescript(SCHEMA)

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {COLUMNS} FROM sessions WHERE org = ? AND conversation = ?",
                (org, conversation),
            ).fetchone()
        return _record(row) if row else None

    def put_session(self, record: SessionRecord) -> None:
        with self._lock:
            self._conn.execute(
                f"INSERT OR REPLACE INTO sessions ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    record.org,
                    record.conversation,
                    record.session_id,
                    record.sandbox_id,
                    record.image_id,
                    record.image_ref,
                    record.status.value,
                    record.created_at,
                    record.last_used_at,
                    record.generation,
                ),
            )

    def touch_session(self, org: str, conversation: str, session_id: str, at: float) -> bool:
        with self._lock:
            cursor = self._conn.execute(
                "UPDATE sessions SET last_used_at = ? "
                "WHERE org = ? AND conversation = ? AND session_id = ?",
                (at, org, conversation, session_id),
            )
        return cursor.rowcount == 1

    def delete_session(self, org: str, conversation: str) -> SessionRecord | None:
        with self._lock:
            row = self._conn.execute(
                f"DELETE FROM sessions WHERE org = ? AND conversation = ? RETURNING {COLUMNS}",
                (org, conversation),
            ).fetchone()
        return _record(row) if row else None

    def list_sessions(self) -> list[SessionRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {COLUMNS} FROM sessions ORDER BY created_at"
            ).fetchall()
        return [_record(row) for row in rows]

    def add_file(self, record: FileRecord) -> None:
        with self._lock:
            self._conn.execute(
                f"INSERT INTO files ({FILE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    record.org,
                    record.conversation,
                    record.file_id,
                    record.name,
                    record.size,
                    record.content_type,
                    record.sha256,
                    record.kind.value,
                    record.created_at,
                ),
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

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"DELETE FROM files WHERE org = ? AND conversation = ? RETURNING {FILE_COLUMNS}",
                (org, conversation),
            ).fetchall()
        return [_file(row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _record(row: tuple[object, ...]) -> SessionRecord:
    org, conv, sid, sbx, image_id, image_ref, status, created, used, gen = row
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
    )


def _file(row: tuple[object, ...]) -> FileRecord:
    org, conv, file_id, name, size, content_type, sha256, kind, created = row
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
    )
