"""The Tool Executions log in Redis (an approval may arrive at another instance
than the call it decides)."""

from __future__ import annotations

from typing import Any

import redis

from runtime.store import keys
from runtime.store.records import ExecutionFilter, ExecutionStatus, ToolExecution
from runtime.store.redis.client import redis_errors

DECIDE = """
-- KEYS[1] execution hash; ARGV[1] pending status, ARGV[2] new status, ARGV[3] new body
-- returns 1 when it was pending (and is now decided), 0 otherwise: a replay does nothing
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'body', ARGV[3])
return 1
"""
PAGE = 200


class RedisExecutions:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._decide = client.register_script(DECIDE)

    def add(self, execution: ToolExecution) -> None:
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(
                keys.execution(execution.org, execution.id),
                mapping={"status": execution.status.value, "body": execution.to_json()},
            )
            pipe.zadd(keys.executions(execution.org), {execution.id: execution.created_at})
            pipe.execute()

    def save(self, execution: ToolExecution) -> None:
        with redis_errors():
            self._redis.hset(
                keys.execution(execution.org, execution.id),
                mapping={"status": execution.status.value, "body": execution.to_json()},
            )

    def get(self, org: str, execution_id: str) -> ToolExecution | None:
        with redis_errors():
            body = self._redis.hget(keys.execution(org, execution_id), "body")
        return ToolExecution.from_json(str(body)) if body else None

    def decide(
        self, org: str, execution_id: str, approval: dict[str, Any], status: ExecutionStatus
    ) -> ToolExecution | None:
        current = self.get(org, execution_id)
        if current is None or current.status is not ExecutionStatus.PENDING_APPROVAL:
            return None
        current.approval, current.status = approval, status
        with redis_errors():
            decided = self._decide(
                keys=[keys.execution(org, execution_id)],
                args=[ExecutionStatus.PENDING_APPROVAL.value, status.value, current.to_json()],
            )
        return current if decided else None

    def find(self, org: str, where: ExecutionFilter) -> list[ToolExecution]:
        high = where.until if where.until is not None else "+inf"
        low = where.since if where.since is not None else "-inf"
        found: list[ToolExecution] = []
        offset = 0
        with redis_errors():
            while len(found) < where.limit:
                ids = self._redis.zrevrangebyscore(
                    keys.executions(org), high, low, start=offset, num=PAGE
                )
                if not ids:
                    break
                offset += len(ids)
                pipe = self._redis.pipeline(transaction=False)
                for execution_id in ids:
                    pipe.hget(keys.execution(org, str(execution_id)), "body")
                for body in pipe.execute():
                    if body and _matches(execution := ToolExecution.from_json(str(body)), where):
                        found.append(execution)
        return found[: where.limit]


def _matches(execution: ToolExecution, where: ExecutionFilter) -> bool:
    return all(
        (
            where.conversation in (None, execution.conversation),
            where.agent_id in (None, execution.agent_id),
            where.function in (None, execution.function),
            where.status in (None, execution.status),
        )
    )
