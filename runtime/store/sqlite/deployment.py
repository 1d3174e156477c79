"""The deployment id, kept once in SQLite."""

from __future__ import annotations

from runtime.store.sqlite.db import Database


class SqliteDeployment:
    def __init__(self, db: Database) -> None:
        self._db = db

    def claim_deployment_id(self, candidate: str) -> str:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('deployment_id', ?)",
                (candidate,),
            )
            row = conn.execute("SELECT value FROM meta WHERE name = 'deployment_id'").fetchone()
        return str(row[0])
