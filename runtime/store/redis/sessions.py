"""Session records and deletion markers in Redis."""

from __future__ import annotations

from dataclasses import asdict

import redis

from runtime.core.records import SessionRecord, SessionStatus, conversation_key
from runtime.store import keys
from runtime.store.redis.client import pairs, redis_errors, strings

PUT_SESSION = """
-- KEYS[1] session hash, KEYS[2] sessions index
-- ARGV[1] fence, ARGV[2] conversation key, ARGV[3..] field, value, ...
-- returns 1 when written, 0 when the stored record has a higher fence
local stored = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if stored > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('SADD', KEYS[2], ARGV[2])
return 1
"""

TOUCH_SESSION = """
-- KEYS[1] session hash
-- ARGV[1] session id, ARGV[2] time, ARGV[3] fence
-- returns 1 when touched, 0 when the session changed or the fence is stale
if redis.call('HGET', KEYS[1], 'session_id') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'fence')) > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'last_used_at', ARGV[2], 'fence', ARGV[3])
return 1
"""

DELETE_SESSION = """
-- KEYS[1] session hash, KEYS[2] sessions index
-- ARGV[1] fence, ARGV[2] conversation key
-- returns the deleted record as field, value, ...; empty when absent or fence stale
local stored = redis.call('HGET', KEYS[1], 'fence')
if not stored or tonumber(stored) > tonumber(ARGV[1]) then return {} end
local fields = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return fields
"""


class RedisSessions:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._put_session = client.register_script(PUT_SESSION)
        self._touch_session = client.register_script(TOUCH_SESSION)
        self._delete_session = client.register_script(DELETE_SESSION)

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        with redis_errors():
            fields = strings(self._redis.hgetall(keys.session(conversation_key(org, conversation))))
        return _session(fields) if fields else None

    def put_session(self, record: SessionRecord) -> bool:
        flat = [str(item) for pair in asdict(record).items() for item in pair]
        with redis_errors():
            written = self._put_session(
                keys=[keys.session(record.key), keys.SESSIONS],
                args=[record.fence, record.key, *flat],
            )
        return bool(written)

    def touch_session(
        self, org: str, conversation: str, session_id: str, at: float, fence: int
    ) -> bool:
        with redis_errors():
            touched = self._touch_session(
                keys=[keys.session(conversation_key(org, conversation))],
                args=[session_id, repr(at), fence],
            )
        return bool(touched)

    def delete_session(self, org: str, conversation: str, fence: int) -> SessionRecord | None:
        key = conversation_key(org, conversation)
        with redis_errors():
            flat = self._delete_session(keys=[keys.session(key), keys.SESSIONS], args=[fence, key])
        return _session(pairs(flat)) if flat else None

    def list_sessions(self) -> list[SessionRecord]:
        with redis_errors():
            members = sorted(str(member) for member in self._redis.smembers(keys.SESSIONS))
            pipe = self._redis.pipeline(transaction=False)
            for member in members:
                pipe.hgetall(keys.session(member))
            rows = pipe.execute()
        records = [_session(strings(row)) for row in rows if row]
        return sorted(records, key=lambda record: record.created_at)


class RedisDeletions:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def mark_deleted(self, key: str) -> None:
        with redis_errors():
            self._redis.sadd(keys.DELETED, key)

    def deleted_keys(self) -> list[str]:
        with redis_errors():
            return sorted(str(member) for member in self._redis.smembers(keys.DELETED))

    def clear_deleted(self, key: str) -> None:
        with redis_errors():
            self._redis.srem(keys.DELETED, key)


def _session(fields: dict[str, str]) -> SessionRecord:
    return SessionRecord(
        org=fields["org"],
        conversation=fields["conversation"],
        session_id=fields["session_id"],
        sandbox_id=fields["sandbox_id"],
        image_id=fields["image_id"],
        image_ref=fields["image_ref"],
        status=SessionStatus(fields["status"]),
        created_at=float(fields["created_at"]),
        last_used_at=float(fields["last_used_at"]),
        generation=int(fields["generation"]),
        user=fields.get("user", ""),
        fence=int(fields.get("fence", "0")),
    )
