"""Idempotency keys in Redis: one hash per key (expiring with the TTL from its first
claim, then from its answer) and one string per running claim, expiring with its hold.
Claims, renewals and completions compare the owner in Lua."""

from __future__ import annotations

import base64

import redis

from runtime.core.records import IdempotencyClaim, IdempotencyEntry, KeptResponse
from runtime.store import keys
from runtime.store.redis.client import pairs, redis_errors

CLAIM_KEY = """
-- KEYS[1] key hash, KEYS[2] its hold, KEYS[3] the conversation's key set (or '')
-- ARGV[1] fingerprint, ARGV[2] owner, ARGV[3] hold in ms, ARGV[4] ttl in ms
-- returns {'claimed', attempt, dispatched or ''} when the caller now runs the request,
-- else {'entry', field, value, ...}: what the key holds
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'owner', ARGV[2], 'attempt', 1)
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[3]), tonumber(ARGV[4])))
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  if KEYS[3] ~= '' then
    redis.call('SADD', KEYS[3], KEYS[1])
    if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then
      redis.call('PEXPIRE', KEYS[3], ARGV[4])
    end
  end
  return {'claimed', '1', ''}
end
if redis.call('HEXISTS', KEYS[1], 'status') == 0
   and redis.call('EXISTS', KEYS[2]) == 0
   and redis.call('HGET', KEYS[1], 'fingerprint') == ARGV[1] then
  local attempt = redis.call('HINCRBY', KEYS[1], 'attempt', 1)
  redis.call('HSET', KEYS[1], 'owner', ARGV[2])
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return {'claimed', tostring(attempt), redis.call('HGET', KEYS[1], 'dispatched') or ''}
end
local entry = redis.call('HGETALL', KEYS[1])
table.insert(entry, 1, 'entry')
return entry
"""

RENEW_KEY = """
-- KEYS[1] key hash, KEYS[2] its hold; ARGV[1] owner, ARGV[2] hold in ms
-- returns 1 when extended, 0 when the claim is gone, another's, or complete
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

MARK_DISPATCHED = """
-- KEYS[1] key hash; ARGV[1] owner, ARGV[2] where the work goes
-- returns 1 when recorded, 0 when the claim is gone, another's, or complete
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  redis.call('HSET', KEYS[1], 'dispatched', ARGV[2])
  return 1
end
return 0
"""

COMPLETE_KEY = """
-- KEYS[1] key hash, KEYS[2] its hold; ARGV[1] owner, ARGV[2] ttl in ms, ARGV[3] status,
-- ARGV[4] content type, ARGV[5] body (base64), ARGV[6] kept ('1' or '0')
-- returns 1 when kept, 0 when the owner no longer holds the claim
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  redis.call('HSET', KEYS[1], 'status', ARGV[3], 'contentType', ARGV[4],
             'body', ARGV[5], 'kept', ARGV[6])
  redis.call('DEL', KEYS[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

RELEASE_KEY = """
-- KEYS[1] key hash, KEYS[2] its hold; ARGV[1] owner
-- returns 1 when given up, 0 when the claim is gone, another's, or complete.
-- Work handed over stays on record (only the hold goes): a retry collects it.
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HEXISTS', KEYS[1], 'status') == 0 then
  redis.call('DEL', KEYS[2])
  if redis.call('HEXISTS', KEYS[1], 'dispatched') == 0 then
    redis.call('DEL', KEYS[1])
  end
  return 1
end
return 0
"""


class RedisIdempotency:
    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._claim = client.register_script(CLAIM_KEY)
        self._renew = client.register_script(RENEW_KEY)
        self._mark = client.register_script(MARK_DISPATCHED)
        self._complete = client.register_script(COMPLETE_KEY)
        self._release = client.register_script(RELEASE_KEY)

    def claim_key(
        self,
        key: str,
        fingerprint: str,
        owner: str,
        hold: float,
        *,
        ttl: float,
        conversation: str | None = None,
    ) -> IdempotencyClaim | IdempotencyEntry:
        names = [
            keys.idempotency(key),
            keys.idempotency_hold(key),
            keys.conversation_keys(conversation) if conversation else "",
        ]
        with redis_errors():
            flat = list(self._claim(keys=names, args=[fingerprint, owner, _ms(hold), _ms(ttl)]))
        tag, *rest = (_text(item) for item in flat)
        if tag == "claimed":
            return IdempotencyClaim(int(rest[0]), rest[1] or None)
        fields = pairs(rest)
        response = None
        if "status" in fields:
            kept = fields.get("kept") == "1"
            body = base64.b64decode(fields.get("body", "")) if kept else None
            response = KeptResponse(int(fields["status"]), fields.get("contentType", ""), body)
        return IdempotencyEntry(fields.get("fingerprint", ""), response)

    def renew_key(self, key: str, owner: str, hold: float) -> bool:
        names = [keys.idempotency(key), keys.idempotency_hold(key)]
        with redis_errors():
            return bool(self._renew(keys=names, args=[owner, _ms(hold)]))

    def mark_dispatched(self, key: str, owner: str, target: str) -> bool:
        with redis_errors():
            return bool(self._mark(keys=[keys.idempotency(key)], args=[owner, target]))

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
        names = [keys.idempotency(key), keys.idempotency_hold(key)]
        with redis_errors():
            return bool(self._complete(keys=names, args=args))

    def release_key(self, key: str, owner: str) -> bool:
        names = [keys.idempotency(key), keys.idempotency_hold(key)]
        with redis_errors():
            return bool(self._release(keys=names, args=[owner]))

    def forget_conversation(self, conversation: str) -> int:
        index = keys.conversation_keys(conversation)
        with redis_errors():
            entries = [_text(name) for name in self._client.smembers(index)]
            holds = [
                keys.idempotency_hold(name.removeprefix(keys.idempotency(""))) for name in entries
            ]
            pipeline = self._client.pipeline(transaction=True)
            for name in [*entries, *holds]:
                pipeline.delete(name)
            pipeline.delete(index)
            results = pipeline.execute()
        return sum(int(result) for result in results[: len(entries)])


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
