"""Session records and deletion markers in SQLite."""

from __future__ import annotations

from dataclasses import astuple

from runtime.core.records import SessionRecord, SessionStatus
from runtime.store.sqlite.db import Database

SESSION_COLUMNS = (
    "org, conversation, session_id, sandbox_id, image_id, image_ref, status, "
    "created_at, last_used_at, generation, user, fence"
)


class SqliteSessions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        with self._db.lock:
            row = self._db.conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE org = ? AND conversation = ?",
                (org, conversation),
            ).fetchone()
        return _session(row) if row else None

    def put_session(self, record: SessionRecord) -> bool:
        with self._db.transaction() as conn:
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
        with self._db.lock:
            cursor = self._db.conn.execute(
                "UPDATE sessions SET last_used_at = ?, fence = ? WHERE org = ? AND "
                "conversation = ? AND session_id = ? AND fence <= ?",
                (at, fence, org, conversation, session_id, fence),
            )
        return cursor.rowcount == 1

    def delete_session(self, org: str, conversation: str, fence: int) -> SessionRecord | None:
        with self._db.lock:
            row = self._db.conn.execute(
                f"DELETE FROM sessions WHERE org = ? AND conversation = ? AND fence <= ? "
                f"RETURNING {SESSION_COLUMNS}",
                (org, conversation, fence),
            ).fetchone()
        return _session(row) if row else None

    def list_sessions(self) -> list[SessionRecord]:
        with self._db.lock:
            rows = self._db.conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at"
            ).fetchall()
        return [_session(row) for row in rows]


class SqliteDeletions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def mark_deleted(self, key: str) -> None:
        with self._db.lock:
            self._db.conn.execute("INSERT OR IGNORE INTO deleted (key) VALUES (?)", (key,))

    def deleted_keys(self) -> list[str]:
        with self._db.lock:
            rows = self._db.conn.execute("SELECT key FROM deleted ORDER BY key").fetchall()
        return [str(row[0]) for row in rows]

    def clear_deleted(self, key: str) -> None:
        with self._db.lock:
            self._db.conn.execute("DELETE FROM deleted WHERE key = ?", (key,))


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
