"""Capacity slots in SQLite."""

from __future__ import annotations

from runtime.store.sqlite.db import Database


class SqliteCapacity:
    def __init__(self, db: Database) -> None:
        self._db = db

    def claim_slot(self, member: str, scopes: list[tuple[str, int]]) -> int | None:
        with self._db.transaction() as conn:
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
        with self._db.lock:
            self._db.conn.executemany(
                "DELETE FROM slots WHERE scope = ? AND member = ?",
                [(scope, member) for scope in scopes],
            )

    def slot_members(self, scope: str) -> list[str]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT member FROM slots WHERE scope = ? ORDER BY member", (scope,)
            ).fetchall()
        return [str(row[0]) for row in rows]
