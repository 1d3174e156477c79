"""The operators' audit trail in SQLite (entries as JSON, indexed by time)."""

from __future__ import annotations

from typing import Any

from runtime.core.operator_records import AuditEntry, AuditFilter
from runtime.store.sqlite.db import Database


class SqliteAudit:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_audit(self, entry: AuditEntry) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO audit (entry_id, at, actor, action, target, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    entry.entry_id,
                    entry.at,
                    entry.actor,
                    entry.action,
                    entry.target,
                    entry.to_json(),
                ),
            )

    def list_audit(self, query: AuditFilter) -> list[AuditEntry]:
        where, args = ["1 = 1"], list[Any]()
        if query.actor is not None:
            where.append("actor = ?")
            args.append(query.actor)
        if query.action is not None:
            if query.action.endswith("."):
                where.append("substr(action, 1, ?) = ?")
                args.extend([len(query.action), query.action])
            else:
                where.append("action = ?")
                args.append(query.action)
        if query.target is not None:
            where.append("target = ?")
            args.append(query.target)
        if query.before is not None:
            where.append("at < ?")
            args.append(query.before)
        sql = f"SELECT body FROM audit WHERE {' AND '.join(where)} ORDER BY at DESC LIMIT ?"
        with self._db.lock:
            rows = self._db.conn.execute(sql, [*args, query.limit]).fetchall()
        return [AuditEntry.from_json(str(body)) for (body,) in rows]

    def prune_audit(self, before: float) -> int:
        with self._db.transaction() as conn:
            return int(conn.execute("DELETE FROM audit WHERE at < ?", (before,)).rowcount)
