"""The operators' audit trail in Redis: one sorted set of entries (JSON) by time;
filters are applied while paging back from the newest."""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.operator_records import AuditEntry, AuditFilter
from runtime.store import keys
from runtime.store.redis.client import redis_errors

PAGE = 500


class RedisAudit:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def add_audit(self, entry: AuditEntry) -> None:
        with redis_errors():
            self._redis.zadd(keys.AUDIT, {entry.to_json(): entry.at})

    def list_audit(self, query: AuditFilter) -> list[AuditEntry]:
        found: list[AuditEntry] = []
        upper = f"({query.before}" if query.before is not None else "+inf"
        offset = 0
        while len(found) < query.limit:
            with redis_errors():
                page: Any = self._redis.zrevrangebyscore(
                    keys.AUDIT, upper, "-inf", start=offset, num=PAGE
                )
            found.extend(e for e in map(AuditEntry.from_json, map(str, page)) if _matches(e, query))
            if len(page) < PAGE:
                break
            offset += PAGE
        return found[: query.limit]

    def prune_audit(self, before: float) -> int:
        with redis_errors():
            return int(self._redis.zremrangebyscore(keys.AUDIT, "-inf", f"({before}"))


def _matches(entry: AuditEntry, query: AuditFilter) -> bool:
    if query.actor is not None and entry.actor != query.actor:
        return False
    if query.target is not None and entry.target != query.target:
        return False
    if query.action is None:
        return True
    if query.action.endswith("."):
        return entry.action.startswith(query.action)
    return entry.action == query.action
