"""The Tool Executions log in SQLite (the ``tool_executions`` table)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

from siesta_contract.tools import ExecutionStatus

from runtime.core.records import ExecutionFilter, ToolExecution
from runtime.store.sqlite.db import Database

log = logging.getLogger(__name__)

LEGACY_FILE = "tool-executions.db"
"""Where versions before the one store kept the log, beside the database."""


class SqliteExecutions:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._import_legacy_log(db.path.parent / LEGACY_FILE)

    def add(self, execution: ToolExecution) -> None:
        with self._db.lock:
            self._db.conn.execute(
                "INSERT INTO tool_executions VALUES (?,?,?,?,?,?,?,?)", _row(execution)
            )

    def save(self, execution: ToolExecution) -> None:
        with self._db.lock:
            self._db.conn.execute(
                "UPDATE tool_executions SET status = ?, body = ? WHERE id = ? AND org = ?",
                (execution.status.value, execution.to_json(), execution.id, execution.org),
            )

    def get(self, org: str, execution_id: str) -> ToolExecution | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM tool_executions WHERE id = ? AND org = ?", (execution_id, org)
            ).fetchone()
        return ToolExecution.from_json(row[0]) if row else None

    def decide(
        self,
        org: str,
        execution_id: str,
        approval: dict[str, object],
        status: ExecutionStatus,
        now: float,
    ) -> ToolExecution | None:
        return self._settle(org, execution_id, status, approval, lambda e: not e.expired(now))

    def expire(self, org: str, execution_id: str, now: float) -> ToolExecution | None:
        approval = {"decision": "expired", "at": now}
        return self._settle(
            org, execution_id, ExecutionStatus.EXPIRED, approval, lambda e: e.expired(now)
        )

    def expire_pending(self, now: float) -> list[ToolExecution]:
        with self._db.lock:
            self._db.conn.execute("DELETE FROM cancelled_approvals WHERE until <= ?", (now,))
            # A literal, so that the partial index of pending rows is used.
            rows = self._db.conn.execute(
                "SELECT org, id FROM tool_executions WHERE status = 'pending_approval'"
            ).fetchall()
        expired = (self.expire(org, execution_id, now) for org, execution_id in rows)
        return [execution for execution in expired if execution is not None]

    def remove_older_than(self, cutoff: float) -> int:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "DELETE FROM tool_executions WHERE created_at < ?", (cutoff,)
            )
        return cursor.rowcount

    def forget_conversation(self, org: str, conversation: str, now: float) -> int:
        where = "org = ? AND conversation = ?"
        with self._db.transaction() as conn:
            waiting = conn.execute(
                f"SELECT body FROM tool_executions WHERE {where} AND status = ?",
                (org, conversation, ExecutionStatus.PENDING_APPROVAL.value),
            ).fetchall()
            cancelled = [ToolExecution.from_json(row[0]) for row in waiting]
            conn.executemany(
                "INSERT OR REPLACE INTO cancelled_approvals (org, id, until) VALUES (?,?,?)",
                [
                    (org, e.id, e.expires_at)
                    for e in cancelled
                    if e.expires_at is not None and e.expires_at > now
                ],
            )
            cursor = conn.execute(f"DELETE FROM tool_executions WHERE {where}", (org, conversation))
        return cursor.rowcount

    def cancelled(self, org: str, execution_id: str, now: float) -> bool:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT 1 FROM cancelled_approvals WHERE org = ? AND id = ? AND until > ?",
                (org, execution_id, now),
            ).fetchone()
        return row is not None

    def _settle(
        self,
        org: str,
        execution_id: str,
        status: ExecutionStatus,
        approval: dict[str, object],
        allowed: Callable[[ToolExecution], bool],
    ) -> ToolExecution | None:
        """Pending → ``status``, settled, if ``allowed``: one transaction, so a
        decision and an expiry (or two decisions) never both happen."""
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT body FROM tool_executions WHERE id = ? AND org = ? AND status = ?",
                (execution_id, org, ExecutionStatus.PENDING_APPROVAL.value),
            ).fetchone()
            if row is None or not allowed(pending := ToolExecution.from_json(row[0])):
                return None
            execution = pending.settled(status, approval)
            conn.execute(
                "UPDATE tool_executions SET status = ?, body = ? WHERE id = ? AND org = ?",
                (status.value, execution.to_json(), execution_id, org),
            )
        return execution

    def find(self, org: str | None, where: ExecutionFilter) -> list[ToolExecution]:
        clauses: list[str] = ["1 = 1"]
        params: list[str] = []
        for column, value in (
            ("org", org),
            ("conversation", where.conversation),
            ("agent_id", where.agent_id),
            ("function", where.function),
            ("status", where.status.value if where.status else None),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.since is not None:
            clauses.append("created_at >= ?")
            params.append(str(where.since))
        if where.until is not None:
            clauses.append("created_at <= ?")
            params.append(str(where.until))
        query = (
            f"SELECT body FROM tool_executions WHERE {' AND '.join(clauses)} "
            "ORDER BY created_at DESC LIMIT ?"
        )
        with self._db.lock:
            rows = self._db.conn.execute(query, (*params, where.limit)).fetchall()
        return [ToolExecution.from_json(row[0]) for row in rows]

    def _import_legacy_log(self, legacy: Path) -> None:
        """Once: copy the log an earlier version kept in its own file, then rename
        that file so the copy is never made twice."""
        if not legacy.is_file():
            return
        source = sqlite3.connect(legacy)
        try:
            rows = source.execute("SELECT * FROM tool_executions").fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            source.close()
        with self._db.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO tool_executions VALUES (?,?,?,?,?,?,?,?)", rows)
        legacy.rename(legacy.with_name(legacy.name + ".imported"))
        log.info("imported %d tool executions from %s", len(rows), legacy)


def _row(execution: ToolExecution) -> tuple[object, ...]:
    return (
        execution.id,
        execution.org,
        execution.conversation,
        execution.agent_id,
        execution.function,
        execution.status.value,
        execution.created_at,
        execution.to_json(),
    )
