"""The warm pool's members in Redis: one sorted set; ZREM decides between claimers."""

from __future__ import annotations

import math
import uuid
from typing import Any

import redis

from runtime.core.records import PoolMember
from runtime.store import keys
from runtime.store.redis.client import redis_errors


class RedisPool:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def add_pool_member(self, member: PoolMember) -> None:
        entry = f"{member.image_id}/{member.sandbox_id}/{member.session_id}"
        with redis_errors():
            self._redis.zadd(keys.POOL, {entry: member.created_at})

    def claim_pool_member(self, image_id: str) -> PoolMember | None:
        with redis_errors():
            for entry, score in self._scored():
                # ZREM tells which of several claimers took it.
                if entry.startswith(f"{image_id}/") and self._redis.zrem(keys.POOL, entry):
                    return _member(entry, score)
        return None

    def remove_pool_member(self, sandbox_id: str) -> bool:
        with redis_errors():
            for entry, _ in self._scored():
                if entry.split("/")[1] == sandbox_id:
                    return bool(self._redis.zrem(keys.POOL, entry))
        return False

    def pool_members(self) -> list[PoolMember]:
        with redis_errors():
            return [_member(entry, score) for entry, score in self._scored()]

    def note_pool_arrival(self, image_id: str, at: float, forget_before: float) -> None:
        key = keys.pool_arrivals(image_id)
        with redis_errors():
            pipe = self._redis.pipeline(transaction=False)
            pipe.zadd(key, {uuid.uuid4().hex: at})
            pipe.zremrangebyscore(key, "-inf", f"({forget_before}")
            # An image nobody asks for any more leaves nothing behind.
            pipe.expire(key, max(1, math.ceil(at - forget_before)))
            pipe.execute()

    def pool_arrivals(self, image_id: str, since: float) -> list[float]:
        with redis_errors():
            entries: list[Any] = list(
                self._redis.zrangebyscore(
                    keys.pool_arrivals(image_id), since, "+inf", withscores=True
                )
            )
        return [float(score) for _, score in entries]

    def _scored(self) -> list[tuple[str, float]]:
        entries: list[Any] = list(self._redis.zrange(keys.POOL, 0, -1, withscores=True))
        return [(str(entry), float(score)) for entry, score in entries]


def _member(entry: str, created_at: float) -> PoolMember:
    image_id, sandbox_id, session_id = entry.split("/", 2)
    return PoolMember(image_id, sandbox_id, session_id, created_at)
