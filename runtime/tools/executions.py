"""Tool Executions: a record of every function call, and the approvals it waited for.

Arguments are stored redacted for the log; the exact arguments of a call that
waits for approval are kept apart, only until it is decided.
"""

from __future__ import annotations

import enum
import json
import re
import sqlite3
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

SECRET_KEY = re.compile(
    r"pass(word)?|secret|token|api[_-]?key|authori[sz]ation|credential|"
    r"cookie|private[_-]?key",
    re.IGNORECASE,
)
REDACTED = "[redacted]"


class ExecutionStatus(enum.StrEnum):
    PENDING_APPROVAL = "pending_approval"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DENIED = "denied"


@dataclass
class ToolExecution:
    id: str
    org: str
    conversation: str
    agent_id: str
    user_id: str
    function: str
    source: str
    arguments: dict[str, Any]
    """Redacted: what the log shows."""
    status: ExecutionStatus
    created_at: float
    result: Any = None
    error: dict[str, Any] | None = None
    duration_ms: int | None = None
    approval: dict[str, Any] | None = None
    """``{"decision": "approved" | "denied", "by": user id, "at": time}``."""
    pending: dict[str, Any] | None = field(default=None, repr=False)
    """While waiting for approval: the exact request to run once approved."""

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation,
            "agentId": self.agent_id,
            "userId": self.user_id,
            "function": self.function,
            "source": self.source,
            "arguments": self.arguments,
            "status": self.status.value,
            "result": self.result,
            "error": self.error,
            "durationMs": self.duration_ms,
            "approval": self.approval,
            "createdAt": self.created_at,
        }


def redact(value: Any) -> Any:
    """A copy with the values of secret-looking keys replaced, at any depth."""
    if isinstance(value, dict):
        return {
            key: REDACTED if SECRET_KEY.search(str(key)) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


@dataclass(frozen=True)
class ExecutionFilter:
    conversation: str | None = None
    agent_id: str | None = None
    function: str | None = None
    status: ExecutionStatus | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 100


class ExecutionLog(Protocol):
    def add(self, execution: ToolExecution) -> None: ...

    def get(self, org: str, execution_id: str) -> ToolExecution | None: ...

    def save(self, execution: ToolExecution) -> None:
        """Write the execution's current state."""

    def decide(
        self, org: str, execution_id: str, approval: dict[str, Any], status: ExecutionStatus
    ) -> ToolExecution | None:
        """Move a pending execution to ``status`` with its approval, once: a second
        decision (a replay) finds nothing pending and returns ``None``."""

    def find(self, org: str, where: ExecutionFilter) -> list[ToolExecution]: ...

    def close(self) -> None: ...


class SqliteExecutionLog:
    SCHEMA = """
    CREATE TABLE IF NOT EXISTS tool_executions (
        id TEXT PRIMARY KEY, org TEXT NOT NULL, conversation TEXT NOT NULL,
        agent_id TEXT NOT NULL, function TEXT NOT NULL, status TEXT NOT NULL,
        created_at REAL NOT NULL, body TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS tool_executions_by_org ON tool_executions (org, created_at);
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.executescript(self.SCHEMA)

    def add(self, execution: ToolExecution) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO tool_executions VALUES (?,?,?,?,?,?,?,?)", _row(execution)
            )

    def save(self, execution: ToolExecution) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE tool_executions SET status = ?, body = ? WHERE id = ? AND org = ?",
                (execution.status.value, _body(execution), execution.id, execution.org),
            )

    def get(self, org: str, execution_id: str) -> ToolExecution | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT body FROM tool_executions WHERE id = ? AND org = ?", (execution_id, org)
            ).fetchone()
        return _load(row[0]) if row else None

    def decide(
        self, org: str, execution_id: str, approval: dict[str, Any], status: ExecutionStatus
    ) -> ToolExecution | None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute(
                    "SELECT body FROM tool_executions WHERE id = ? AND org = ? AND status = ?",
                    (execution_id, org, ExecutionStatus.PENDING_APPROVAL.value),
                ).fetchone()
                if row is None:
                    self._conn.execute("ROLLBACK")
                    return None
                execution = _load(row[0])
                execution.approval = approval
                execution.status = status
                self._conn.execute(
                    "UPDATE tool_executions SET status = ?, body = ? WHERE id = ?",
                    (status.value, _body(execution), execution_id),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return execution

    def find(self, org: str, where: ExecutionFilter) -> list[ToolExecution]:
        clauses, params = ["org = ?"], [org]
        for column, value in (
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
        with self._lock:
            rows = self._conn.execute(query, (*params, where.limit)).fetchall()
        return [_load(row[0]) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def build_log(store_url: str, data_dir: Path) -> ExecutionLog:
    """Redis when the state is in Redis (approvals may reach another instance), else SQLite."""
    from runtime.store import parse_store_url

    kind, target = parse_store_url(store_url)
    if kind == "redis":
        from runtime.tools.redis_log import RedisExecutionLog

        return RedisExecutionLog(target)
    return SqliteExecutionLog(data_dir / "tool-executions.db")


def _body(execution: ToolExecution) -> str:
    data = asdict(execution)
    data["status"] = execution.status.value
    return json.dumps(data, ensure_ascii=False, default=str)


def _row(execution: ToolExecution) -> tuple[Any, ...]:
    return (
        execution.id,
        execution.org,
        execution.conversation,
        execution.agent_id,
        execution.function,
        execution.status.value,
        execution.created_at,
        _body(execution),
    )


def _load(body: str) -> ToolExecution:
    data = json.loads(body)
    data["status"] = ExecutionStatus(data["status"])
    return ToolExecution(**data)
