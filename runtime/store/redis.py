"""The shared store for several service instances: Redis.

Key names are in ``keys.py``. Every change that touches more than one key, or
must compare before it writes, is one Lua script (atomic on the server). The
scripts touch only the keys they are given, except ``DELETE_FILES``, which
derives file keys from ids (fine on one Redis; not on Redis Cluster).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import redis
import redis.exceptions

from runtime.errors import StateUnavailable
from runtime.store import keys
from runtime.store.base import (
    FileKind,
    FileRecord,
    SessionRecord,
    SessionStatus,
    conversation_key,
)

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

DELETE_FILES = """
-- KEYS[1] the conversation's file index; ARGV[1] the prefix of file keys
-- returns each deleted file as field, value, ...
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. id
  out[#out + 1] = redis.call('HGETALL', key)
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[1])
return out
"""

REPLACE_FILE = """
-- KEYS[1] file hash; ARGV[1] org, ARGV[2] conversation, ARGV[3] size, ARGV[4] type, ARGV[5] sha256
-- returns 1 when updated, 0 when no such file in that conversation
if redis.call('HGET', KEYS[1], 'org') ~= ARGV[1]
   or redis.call('HGET', KEYS[1], 'conversation') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'size', ARGV[3], 'content_type', ARGV[4], 'sha256', ARGV[5])
return 1
"""

# BLPOP must return before the socket read times out.
SOCKET_TIMEOUT_SECONDS = 10.0
MAX_BLOCK_SECONDS = 5.0


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """An unreachable or restarting Redis is ``state_unavailable``."""
    try:
        yield
    except (
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.BusyLoadingError,
    ) as exc:
        msg = f"the state store (Redis) is not reachable: {exc}"
        raise StateUnavailable(msg) from exc


class RedisStore:
    def __init__(self, url: str) -> None:
        self._redis = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            socket_connect_timeout=2.0,
            health_check_interval=10,
        )
        register = self._redis.register_script
        self._put_session = register(PUT_SESSION)
        self._touch_session = register(TOUCH_SESSION)
        self._delete_session = register(DELETE_SESSION)
        self._acquire = register(ACQUIRE_LEASE)
        self._renew = register(RENEW_LEASE)
        self._release = register(RELEASE_LEASE)
        self._claim = register(CLAIM_SLOT)
        self._delete_files = register(DELETE_FILES)
        self._replace_file = register(REPLACE_FILE)

    # -- sessions ----------------------------------------------------------------------

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        with redis_errors():
            fields = _strings(
                self._redis.hgetall(keys.session(conversation_key(org, conversation)))
            )
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
        return _session(_pairs(flat)) if flat else None

    def list_sessions(self) -> list[SessionRecord]:
        with redis_errors():
            members = sorted(str(member) for member in self._redis.smembers(keys.SESSIONS))
            pipe = self._redis.pipeline(transaction=False)
            for member in members:
                pipe.hgetall(keys.session(member))
            rows = pipe.execute()
        records = [_session(_strings(row)) for row in rows if row]
        return sorted(records, key=lambda record: record.created_at)

    # -- leases ----------------------------------------------------------------------

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

    # -- capacity slots --------------------------------------------------------------

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

    # -- files -------------------------------------------------------------------------

    def add_file(self, record: FileRecord) -> None:
        conversation = conversation_key(record.org, record.conversation)
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(
                keys.file(record.file_id),
                mapping={name: str(value) for name, value in asdict(record).items()},
            )
            pipe.zadd(keys.files(conversation), {record.file_id: record.created_at})
            pipe.execute()

    def list_files(self, org: str, conversation: str) -> list[FileRecord]:
        with redis_errors():
            ids = self._redis.zrange(keys.files(conversation_key(org, conversation)), 0, -1)
            pipe = self._redis.pipeline(transaction=False)
            for file_id in ids:
                pipe.hgetall(keys.file(str(file_id)))
            rows = pipe.execute()
        return [_file(_strings(row)) for row in rows if row]

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        with redis_errors():
            fields = _strings(self._redis.hgetall(keys.file(file_id)))
        if not fields or (fields["org"], fields["conversation"]) != (org, conversation):
            return None
        return _file(fields)

    def replace_file(self, record: FileRecord) -> bool:
        with redis_errors():
            return bool(
                self._replace_file(
                    keys=[keys.file(record.file_id)],
                    args=[
                        record.org,
                        record.conversation,
                        record.size,
                        record.content_type,
                        record.sha256,
                    ],
                )
            )

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        with redis_errors():
            rows = self._delete_files(
                keys=[keys.files(conversation_key(org, conversation))], args=[keys.file("")]
            )
        return [_file(_pairs(row)) for row in rows if row]

    def mark_deleted(self, key: str) -> None:
        with redis_errors():
            self._redis.sadd(keys.DELETED, key)

    def deleted_keys(self) -> list[str]:
        with redis_errors():
            return sorted(str(member) for member in self._redis.smembers(keys.DELETED))

    def clear_deleted(self, key: str) -> None:
        with redis_errors():
            self._redis.srem(keys.DELETED, key)

    def clear_expired_leases(self) -> int:
        return 0  # Redis expires lease keys by their TTL

    def ping(self) -> None:
        with redis_errors():
            self._redis.ping()

    def close(self) -> None:
        self._redis.close()


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _strings(mapping: Any) -> dict[str, str]:
    """redis-py's answers typed as bytes-or-str; with decode_responses they are str."""
    return {str(name): str(value) for name, value in dict(mapping).items()}


def _pairs(flat: list[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


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


def _file(fields: dict[str, str]) -> FileRecord:
    return FileRecord(
        org=fields["org"],
        conversation=fields["conversation"],
        file_id=fields["file_id"],
        name=fields["name"],
        size=int(fields["size"]),
        content_type=fields["content_type"],
        sha256=fields["sha256"],
        kind=FileKind(fields["kind"]),
        created_at=float(fields["created_at"]),
        editable=fields.get("editable") == "True",
    )
