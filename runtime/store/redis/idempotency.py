"""Idempotency keys in Redis: one hash per key whose expiry is the running claim's
hold, then the kept answer's TTL. Claims and completions compare the owner in Lua."""

from __future__ import annotations

import base64

import redis

from runtime.store import keys
from runtime.store.records import IdempotencyEntry, KeptResponse
from runtime.store.redis.client import pairs, redis_errors

CLAIM_KEY = """
-- KEYS[1] key hash; ARGV[1] fingerprint, ARGV[2] owner, ARGV[3] hold in ms
-- returns {} when claimed, else the hash's fields and values
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'owner', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {}
end
return redis.call('HGETALL', KEYS[1])
"""

RENEW_KEY = """
-- KEYS[1] key hash; ARGV[1] owner, ARGV[2] hold in ms
-- returns 1 when extended, 0 when the claim is gone, another's, or complete
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

COMPLETE_KEY = """
-- KEYS[1] key hash; ARGV[1] owner, ARGV[2] ttl in ms, ARGV[3] status,
-- ARGV[4] content type, ARGV[5] body (base64), ARGV[6] kept ('1' or '0')
-- returns 1 when kept, 0 when the owner no longer holds the claim
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  redis.call('HSET', KEYS[1], 'status', ARGV[3], 'contentType', ARGV[4],
             'body', ARGV[5], 'kept', ARGV[6])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

RELEASE_KEY = """
-- KEYS[1] key hash; ARGV[1] owner
-- returns 1 when dropped, 0 when the claim is gone, another's, or complete
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisIdempotency:
    def __init__(self, client: redis.Redis) -> None:
        self._claim = client.register_script(CLAIM_KEY)
        self._renew = client.register_script(RENEW_KEY)
        self._complete = client.register_script(COMPLETE_KEY)
        self._release = client.register_script(RELEASE_KEY)

    def claim_key(
        self, key: str, fingerprint: str, owner: str, hold: float
    ) -> IdempotencyEntry | None:
        with redis_errors():
            flat = self._claim(keys=[keys.idempotency(key)], args=[fingerprint, owner, _ms(hold)])
        if not flat:
            return None
        fields = pairs(list(flat))
        response = None
        if "status" in fields:
            kept = fields.get("kept") == "1"
            body = base64.b64decode(fields.get("body", "")) if kept else None
            response = KeptResponse(int(fields["status"]), fields.get("contentType", ""), body)
        return IdempotencyEntry(fields.get("fingerprint", ""), response)

    def renew_key(self, key: str, owner: str, hold: float) -> bool:
        with redis_errors():
            return bool(self._renew(keys=[keys.idempotency(key)], args=[owner, _ms(hold)]))

    def complete_key(self, key: str, owner: str, response: KeptResponse, ttl: float) -> bool:
        body = base64.b64encode(response.body or b"").decode()
        kept = "1" if response.body is not None else "0"
        args: list[str | int] = [
            owner,
            _ms(ttl),
            response.status,
            response.content_type,
            body,
            kept,
        ]
        with redis_errors():
            return bool(self._complete(keys=[keys.idempotency(key)], args=args))

    def release_key(self, key: str, owner: str) -> bool:
        with redis_errors():
            return bool(self._release(keys=[keys.idempotency(key)], args=[owner]))


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
