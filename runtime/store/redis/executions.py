"""The Tool Executions log in Redis (an approval may arrive at another instance
than the call it decides)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import redis

from siesta_contract.tools import ExecutionStatus

from runtime.core.records import ExecutionFilter, ToolExecution, conversation_key
from runtime.store import keys
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
SAVE = """
-- KEYS[1] execution hash; ARGV[1] status, ARGV[2] body
-- returns 1 when written; 0 when the entry is gone (its conversation was deleted
-- while the call ran): a save never brings an entry back
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'body', ARGV[2])
return 1
"""

FORGET_CONVERSATION = """
-- KEYS[1] the conversation's executions, KEYS[2] the org's executions,
-- KEYS[3] every org's executions by time, KEYS[4] the pending-approvals index
-- ARGV[1] prefix of the org's execution keys, ARGV[2] prefix of the org's index
-- members (org/), ARGV[3] prefix of the org's cancelled-approval keys, ARGV[4] now,
-- ARGV[5] pending status
-- returns how many entries were removed; each one still waiting for approval
-- before its deadline leaves a cancelled-approval key that expires at the deadline
local now, removed = tonumber(ARGV[4]), 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. id
  if redis.call('HGET', key, 'status') == ARGV[5] then
    local deadline = redis.call('HGET', key, 'expires_at')
    local left = deadline and (tonumber(deadline) - now) or 0
    if left > 0 then
      redis.call('SET', ARGV[3] .. id, deadline, 'PX', math.ceil(left * 1000))
    end
  end
  removed = removed + redis.call('DEL', key)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], ARGV[2] .. id)
  redis.call('ZREM', KEYS[4], ARGV[2] .. id)
end
redis.call('DEL', KEYS[1])
return removed
"""
PAGE = 200


class RedisExecutions:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._settle_script = client.register_script(SETTLE)
        self._save_script = client.register_script(SAVE)
        self._forget_script = client.register_script(FORGET_CONVERSATION)

    def add(self, execution: ToolExecution) -> None:
        key, member = (
            keys.execution(execution.org, execution.id),
            _member(execution.org, execution.id),
        )
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(
                key,
                mapping={
                    "status": execution.status.value,
                    "body": execution.to_json(),
                    "conversation": execution.conversation,
                },
            )
            if execution.expires_at is not None:
                pipe.hset(key, "expires_at", execution.expires_at)
            pipe.zadd(keys.executions(execution.org), {execution.id: execution.created_at})
            pipe.zadd(
                keys.conversation_executions(
                    conversation_key(execution.org, execution.conversation)
                ),
                {execution.id: execution.created_at},
            )
            pipe.zadd(keys.EXECUTIONS_BY_TIME, {member: execution.created_at})
            if execution.status is ExecutionStatus.PENDING_APPROVAL:
                deadline = execution.expires_at if execution.expires_at is not None else math.inf
                pipe.zadd(keys.APPROVALS_PENDING, {member: deadline})
            pipe.execute()

    def save(self, execution: ToolExecution) -> None:
        with redis_errors():
            self._save_script(
                keys=[keys.execution(execution.org, execution.id)],
                args=[execution.status.value, execution.to_json()],
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
        self._index_conversations_once()
        removed = 0
        with redis_errors():
            while members := [
                str(member)
                for member in self._redis.zrangebyscore(
                    keys.EXECUTIONS_BY_TIME, "-inf", f"({cutoff}", start=0, num=PAGE
                )
            ]:
                conversations = self._conversations_of(members)
                pipe = self._redis.pipeline(transaction=True)
                for member, conversation in zip(members, conversations, strict=True):
                    org, execution_id = member.split("/", 1)
                    pipe.delete(keys.execution(org, execution_id))
                    pipe.zrem(keys.executions(org), execution_id)
                    pipe.zrem(keys.APPROVALS_PENDING, member)
                    if conversation is not None:
                        index = keys.conversation_executions(conversation_key(org, conversation))
                        pipe.zrem(index, execution_id)
                pipe.zrem(keys.EXECUTIONS_BY_TIME, *members)
                pipe.execute()
                removed += len(members)
        return removed

    def forget_conversation(self, org: str, conversation: str, now: float) -> int:
        self._index_conversations_once()
        with redis_errors():
            removed = self._forget_script(
                keys=[
                    keys.conversation_executions(conversation_key(org, conversation)),
                    keys.executions(org),
                    keys.EXECUTIONS_BY_TIME,
                    keys.APPROVALS_PENDING,
                ],
                args=[
                    keys.execution(org, ""),
                    _member(org, ""),
                    keys.cancelled_approval(org, ""),
                    repr(now),
                    ExecutionStatus.PENDING_APPROVAL.value,
                ],
            )
        return int(removed)

    def cancelled(self, org: str, execution_id: str, now: float) -> bool:
        with redis_errors():
            deadline = self._redis.get(keys.cancelled_approval(org, execution_id))
        return deadline is not None and float(deadline) > now

    def find(self, org: str | None, where: ExecutionFilter) -> list[ToolExecution]:
        if org is None:  # every org's: their ``org/id`` members by time
            self._index_earlier_executions()
        index = keys.executions(org) if org is not None else keys.EXECUTIONS_BY_TIME
        high = where.until if where.until is not None else "+inf"
        low = where.since if where.since is not None else "-inf"
        found: list[ToolExecution] = []
        offset = 0
        with redis_errors():
            while len(found) < where.limit:
                ids = self._redis.zrevrangebyscore(index, high, low, start=offset, num=PAGE)
                if not ids:
                    break
                offset += len(ids)
                pipe = self._redis.pipeline(transaction=False)
                for member in map(str, ids):
                    pipe.hget(keys.execution(*_split(org, member)), "body")
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

    def _conversations_of(self, members: list[str]) -> list[str | None]:
        """The conversation of each ``org/id`` (``None``: the entry is gone); read from
        the body of an entry an earlier version wrote."""
        names = [keys.execution(*member.split("/", 1)) for member in members]
        pipe = self._redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(name, "conversation")
        found: list[str | None] = [str(c) if c else None for c in pipe.execute()]
        for i, name in enumerate(names):
            if found[i] is None and (body := self._redis.hget(name, "body")):
                found[i] = ToolExecution.from_json(str(body)).conversation
        return found

    def _index_conversations_once(self) -> None:
        """Once per store: put the executions that versions before deletion removed
        them wrote into their conversation's set (and mark each with its conversation)."""
        with redis_errors():
            if not self._redis.set(keys.EXECUTIONS_BY_CONVERSATION_INDEXED, "1", nx=True):
                return
            pattern = keys.EXECUTION_PREFIX + "*"
            for names in _batches(self._redis.scan_iter(match=pattern, count=1000), PAGE):
                read = self._redis.pipeline(transaction=False)
                for name in names:
                    read.hget(name, "body")
                write = self._redis.pipeline(transaction=False)
                for name, body in zip(names, read.execute(), strict=True):
                    if not body:
                        continue
                    e = ToolExecution.from_json(str(body))
                    write.hset(name, "conversation", e.conversation)
                    index = keys.conversation_executions(conversation_key(e.org, e.conversation))
                    write.zadd(index, {e.id: e.created_at})
                write.execute()


def _batches(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _member(org: str, execution_id: str) -> str:
    return f"{org}/{execution_id}"


def _split(org: str | None, member: str) -> tuple[str, str]:
    """(org, id) of an index member: an id in one org's index, ``org/id`` in every org's."""
    if org is not None:
        return org, member
    found, execution_id = member.split("/", 1)
    return found, execution_id


def _matches(execution: ToolExecution, where: ExecutionFilter) -> bool:
    return all(
        (
            where.conversation in (None, execution.conversation),
            where.agent_id in (None, execution.agent_id),
            where.function in (None, execution.function),
            where.status in (None, execution.status),
        )
    )
