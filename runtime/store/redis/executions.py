"""The Tool Executions log in Redis (an approval may arrive at another instance
than the call it decides)."""

from __future__ import annotations

import math
from typing import Any

import redis

from runtime.store import keys
from runtime.store.records import ExecutionFilter, ExecutionStatus, ToolExecution
from runtime.store.redis.client import redis_errors

SETTLE = """
-- KEYS[1] execution hash, KEYS[2] pending-approvals index
-- ARGV[1] pending status, ARGV[2] new status, ARGV[3] new body, ARGV[4] now,
-- ARGV[5] index member (org/id), ARGV[6] '1' to expire (only at or past the
-- deadline), '0' to decide (only before it)
-- returns 1 when it moved; 0 when it was not pending or on the other side of its
-- deadline: a replay, or a decision that lost to the expiry, does nothing
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
local deadline = tonumber(redis.call('HGET', KEYS[1], 'expires_at') or '')
local past = deadline ~= nil and deadline <= tonumber(ARGV[4])
if past ~= (ARGV[6] == '1') then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'body', ARGV[3])
redis.call('HDEL', KEYS[1], 'expires_at')
redis.call('ZREM', KEYS[2], ARGV[5])
return 1
"""
PAGE = 200


class RedisExecutions:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._settle_script = client.register_script(SETTLE)

    def add(self, execution: ToolExecution) -> None:
        key, member = (
            keys.execution(execution.org, execution.id),
            _member(execution.org, execution.id),
        )
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(key, mapping={"status": execution.status.value, "body": execution.to_json()})
            if execution.expires_at is not None:
                pipe.hset(key, "expires_at", execution.expires_at)
            pipe.zadd(keys.executions(execution.org), {execution.id: execution.created_at})
            pipe.zadd(keys.EXECUTIONS_BY_TIME, {member: execution.created_at})
            if execution.status is ExecutionStatus.PENDING_APPROVAL:
                deadline = execution.expires_at if execution.expires_at is not None else math.inf
                pipe.zadd(keys.APPROVALS_PENDING, {member: deadline})
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
        self,
        org: str,
        execution_id: str,
        approval: dict[str, Any],
        status: ExecutionStatus,
        now: float,
    ) -> ToolExecution | None:
        return self._settle(org, execution_id, status, approval, now, expiring=False)

    def expire(self, org: str, execution_id: str, now: float) -> ToolExecution | None:
        approval = {"decision": "expired", "at": now}
        expired = ExecutionStatus.EXPIRED
        return self._settle(org, execution_id, expired, approval, now, expiring=True)

    def expire_pending(self, now: float) -> list[ToolExecution]:
        with redis_errors():
            members = self._redis.zrangebyscore(keys.APPROVALS_PENDING, "-inf", now)
        expired = []
        for member in map(str, members):
            org, execution_id = member.split("/", 1)
            execution = self.expire(org, execution_id, now)
            if execution is not None:
                expired.append(execution)
            elif self.get(org, execution_id) is None:  # removed by retention meanwhile
                with redis_errors():
                    self._redis.zrem(keys.APPROVALS_PENDING, member)
        return expired

    def remove_older_than(self, cutoff: float) -> int:
        self._index_earlier_executions()
        removed = 0
        with redis_errors():
            while members := [
                str(member)
                for member in self._redis.zrangebyscore(
                    keys.EXECUTIONS_BY_TIME, "-inf", f"({cutoff}", start=0, num=PAGE
                )
            ]:
                pipe = self._redis.pipeline(transaction=True)
                for member in members:
                    org, execution_id = member.split("/", 1)
                    pipe.delete(keys.execution(org, execution_id))
                    pipe.zrem(keys.executions(org), execution_id)
                    pipe.zrem(keys.APPROVALS_PENDING, member)
                pipe.zrem(keys.EXECUTIONS_BY_TIME, *members)
                pipe.execute()
                removed += len(members)
        return removed

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

    def _settle(
        self,
        org: str,
        execution_id: str,
        status: ExecutionStatus,
        approval: dict[str, Any],
        now: float,
        *,
        expiring: bool,
    ) -> ToolExecution | None:
        # The body is computed from a read; the script writes it only if the record
        # is still pending, and a pending record changes only by settling.
        current = self.get(org, execution_id)
        if current is None or current.status is not ExecutionStatus.PENDING_APPROVAL:
            return None
        settled = current.settled(status, approval)
        with redis_errors():
            moved = self._settle_script(
                keys=[keys.execution(org, execution_id), keys.APPROVALS_PENDING],
                args=[
                    ExecutionStatus.PENDING_APPROVAL.value,
                    status.value,
                    settled.to_json(),
                    repr(now),
                    _member(org, execution_id),
                    "1" if expiring else "0",
                ],
            )
        return settled if moved else None

    def _index_earlier_executions(self) -> None:
        """Once per store: put the executions that versions before retention wrote
        (per-org sets only) into the index retention reads."""
        with redis_errors():
            if not self._redis.set(keys.EXECUTIONS_INDEXED, "1", nx=True):
                return
            prefix = keys.executions("")
            for name in self._redis.scan_iter(match=prefix + "*", count=1000):
                org = str(name).removeprefix(prefix)
                scored = self._redis.zrange(name, 0, -1, withscores=True)
                members = {_member(org, str(entry[0])): float(entry[1]) for entry in scored}
                if members:
                    self._redis.zadd(keys.EXECUTIONS_BY_TIME, members, nx=True)


def _member(org: str, execution_id: str) -> str:
    return f"{org}/{execution_id}"


def _matches(execution: ToolExecution, where: ExecutionFilter) -> bool:
    return all(
        (
            where.conversation in (None, execution.conversation),
            where.agent_id in (None, execution.agent_id),
            where.function in (None, execution.function),
            where.status in (None, execution.status),
        )
    )
