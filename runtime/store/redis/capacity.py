"""Capacity slots in Redis: one set per scope, claimed in Lua."""

from __future__ import annotations

import redis

from runtime.store import keys
from runtime.store.redis.client import redis_errors

CLAIM_SLOT = """
-- KEYS scope sets; ARGV[1] member, ARGV[2..] the limits, in KEYS order
-- returns 0 when counted in every scope, else the 1-based index of the first full one
for i, key in ipairs(KEYS) do
  if redis.call('SISMEMBER', key, ARGV[1]) == 0
     and redis.call('SCARD', key) >= tonumber(ARGV[i + 1]) then
    return i
  end
end
for _, key in ipairs(KEYS) do redis.call('SADD', key, ARGV[1]) end
return 0
"""


class RedisCapacity:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._claim = client.register_script(CLAIM_SLOT)

    def claim_slot(self, member: str, scopes: list[tuple[str, int]]) -> int | None:
        with redis_errors():
            full = int(
                self._claim(
                    keys=[keys.slots(scope) for scope, _ in scopes],
                    args=[member, *(limit for _, limit in scopes)],
                )
            )
        return full - 1 if full else None

    def release_slot(self, member: str, scopes: list[str]) -> None:
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            for scope in scopes:
                pipe.srem(keys.slots(scope), member)
            pipe.execute()

    def slot_members(self, scope: str) -> list[str]:
        with redis_errors():
            return sorted(str(member) for member in self._redis.smembers(keys.slots(scope)))
