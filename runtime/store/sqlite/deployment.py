"""The deployment id and egress key, each kept once in SQLite."""

from __future__ import annotations

from runtime.store.sqlite.db import Database


class SqliteDeployment:
    def __init__(self, db: Database) -> None:
        self._db = db

    def claim_deployment_id(self, candidate: str) -> str:
        return self._claim("deployment_id", candidate)

    def claim_egress_key(self, candidate: str) -> str:
        return self._claim("egress_key", candidate)

    def _claim(self, name: str, candidate: str) -> str:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (name, candidate)
            )
            row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return str(row[0])
