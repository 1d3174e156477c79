"""Sandboxes made through the E2B API, in SQLite (the record as JSON, keyed by org)."""

from __future__ import annotations

from runtime.core.records import E2bSandbox
from runtime.store.sqlite.db import Database


class SqliteE2b:
    def __init__(self, db: Database) -> None:
        self._db = db

    def put_e2b(self, sandbox: E2bSandbox) -> None:
        with self._db.lock:
            self._db.conn.execute(
                "INSERT OR REPLACE INTO e2b_sandboxes (org, sandbox_id, started_at, end_at, body) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    sandbox.org,
                    sandbox.sandbox_id,
                    sandbox.started_at,
                    sandbox.end_at,
                    sandbox.to_json(),
                ),
            )

    def get_e2b(self, org: str, sandbox_id: str) -> E2bSandbox | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM e2b_sandboxes WHERE org = ? AND sandbox_id = ?",
                (org, sandbox_id),
            ).fetchone()
        return E2bSandbox.from_json(str(row[0])) if row else None

    def list_e2b(self, org: str) -> list[E2bSandbox]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM e2b_sandboxes WHERE org = ? ORDER BY started_at, sandbox_id",
                (org,),
            ).fetchall()
        return [E2bSandbox.from_json(str(body)) for (body,) in rows]

    def find_e2b(self, sandbox_id: str) -> E2bSandbox | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM e2b_sandboxes WHERE sandbox_id = ?", (sandbox_id,)
            ).fetchone()
        return E2bSandbox.from_json(str(row[0])) if row else None

    def delete_e2b(self, org: str, sandbox_id: str) -> bool:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "DELETE FROM e2b_sandboxes WHERE org = ? AND sandbox_id = ?", (org, sandbox_id)
            )
        return cursor.rowcount == 1

    def due_e2b(self, now: float) -> list[E2bSandbox]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM e2b_sandboxes WHERE end_at <= ? ORDER BY end_at", (now,)
            ).fetchall()
        return [E2bSandbox.from_json(str(body)) for (body,) in rows]
