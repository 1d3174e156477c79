"""Leases in Redis: the owner token with the TTL as its expiry, a fence from one
INCR counter, compare-and-extend and compare-and-delete in Lua, BLPOP wake-ups."""

from __future__ import annotations

import redis

from runtime.store import keys
from runtime.store.redis.client import redis_errors

ACQUIRE_LEASE = """
-- KEYS[1] lease, KEYS[2] fence counter
-- ARGV[1] owner token, ARGV[2] ttl in ms
-- returns the new fence, or 0 when someone holds the lease
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""

RENEW_LEASE = """
-- KEYS[1] lease; ARGV[1] owner token, ARGV[2] ttl in ms
-- returns 1 when extended, 0 when the owner no longer holds it
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

RELEASE_LEASE = """
-- KEYS[1] lease, KEYS[2] wake-up list; ARGV[1] owner token
-- returns 1 when released (and one waiter woken), 0 when not the owner
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[2])
  redis.call('LPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], 5000)
  return 1
end
return 0
"""

# BLPOP must return before the socket read times out.
MAX_BLOCK_SECONDS = 5.0


class RedisLeases:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._acquire = client.register_script(ACQUIRE_LEASE)
        self._renew = client.register_script(RENEW_LEASE)
        self._release = client.register_script(RELEASE_LEASE)

    def acquire_lease(self, key: str, owner: str, ttl: float) -> int | None:
        with redis_errors():
            fence = int(
                self._acquire(keys=[keys.lease(key), keys.FENCE_COUNTER], args=[owner, _ms(ttl)])
            )
        return fence or None

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        with redis_errors():
            return bool(self._renew(keys=[keys.lease(key)], args=[owner, _ms(ttl)]))

    def release_lease(self, key: str, owner: str) -> bool:
        with redis_errors():
            return bool(
                self._release(keys=[keys.lease(key), keys.lease_released(key)], args=[owner])
            )

    def wait_for_release(self, key: str, timeout: float) -> None:
        with redis_errors():
            remaining_ms = int(self._redis.pttl(keys.lease(key)))
            if remaining_ms == -2:  # no lease: free now
                return
            # Woken by a release's token; else when the holder's TTL runs out.
            block = min(timeout, MAX_BLOCK_SECONDS, max(remaining_ms, 0) / 1000 + 0.01)
            if block > 0:
                self._redis.blpop([keys.lease_released(key)], timeout=block)

    def lease_owner(self, key: str) -> str | None:
        with redis_errors():
            owner = self._redis.get(keys.lease(key))
        return str(owner) if owner is not None else None

    def clear_expired_leases(self) -> int:
        return 0  # Redis expires lease keys by their TTL


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
