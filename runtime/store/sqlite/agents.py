"""Registered agents in SQLite (the record as JSON, keyed by org and agent id)."""

from __future__ import annotations

from runtime.core.records import AgentRecord
from runtime.store.sqlite.db import Database


class SqliteAgents:
    def __init__(self, db: Database) -> None:
        self._db = db

    def put_agent(self, record: AgentRecord, limit: int) -> bool:
        with self._db.transaction() as conn:
            known = conn.execute(
                "SELECT 1 FROM agents WHERE org = ? AND agent_id = ?",
                (record.org, record.agent_id),
            ).fetchone()
            if known is None:
                (count,) = conn.execute(
                    "SELECT COUNT(*) FROM agents WHERE org = ?", (record.org,)
                ).fetchone()
                if count >= limit:
                    return False
            conn.execute(
                "INSERT INTO agents (org, agent_id, body) VALUES (?, ?, ?) "
                "ON CONFLICT (org, agent_id) DO UPDATE SET body = excluded.body",
                (record.org, record.agent_id, record.to_json()),
            )
        return True

    def get_agent(self, org: str, agent_id: str) -> AgentRecord | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM agents WHERE org = ? AND agent_id = ?", (org, agent_id)
            ).fetchone()
        return AgentRecord.from_json(str(row[0])) if row else None

    def list_agents(self, org: str) -> list[AgentRecord]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM agents WHERE org = ? ORDER BY agent_id", (org,)
            ).fetchall()
        return [AgentRecord.from_json(str(body)) for (body,) in rows]

    def delete_agent(self, org: str, agent_id: str) -> bool:
        with self._db.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM agents WHERE org = ? AND agent_id = ?", (org, agent_id)
            ).rowcount
        return bool(deleted)
