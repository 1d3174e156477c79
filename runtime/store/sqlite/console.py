"""Console sessions in SQLite (the record as JSON, keyed by the digest of the cookie's
id); expired ones are dropped whenever a new one is kept."""

from __future__ import annotations

from runtime.core.operator_records import ConsoleSession
from runtime.store.sqlite.db import Database


class SqliteConsoleSessions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def put_console_session(self, session: ConsoleSession) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM console_sessions WHERE expires_at <= ?", (session.created_at,)
            )
            conn.execute(
                "INSERT OR REPLACE INTO console_sessions (id_digest, expires_at, body) "
                "VALUES (?, ?, ?)",
                (session.id_digest, session.expires_at, session.to_json()),
            )

    def get_console_session(self, id_digest: str, now: float) -> ConsoleSession | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM console_sessions WHERE id_digest = ? AND expires_at > ?",
                (id_digest, now),
            ).fetchone()
        return ConsoleSession.from_json(str(row[0])) if row else None

    def delete_console_session(self, id_digest: str) -> bool:
        with self._db.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM console_sessions WHERE id_digest = ?", (id_digest,)
            ).rowcount
        return bool(deleted)
