"""Memory banks in Redis: a hash per org (bank id → the record as JSON), a list per
bank key (entries as JSON, oldest first) and a set of each bank's keys. Adding checks
the bank and the key's count in the same script; deleting removes the bank first, so
no entry can be added to it while its lists go."""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.records import MemoryBank, MemoryEntry
from runtime.store import keys
from runtime.store.redis.client import redis_errors

ADD_BANK = """
-- KEYS[1] the org's banks hash
-- ARGV[1] bank id, ARGV[2] the record as JSON, ARGV[3] the limit
-- returns 1 when added, 0 when the org has the limit's count already
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

ADD_ENTRY = """
-- KEYS[1] the org's banks hash, KEYS[2] the key's entries list, KEYS[3] the bank's keys set
-- ARGV[1] bank id, ARGV[2] the entry as JSON, ARGV[3] the limit, ARGV[4] the partition key
-- returns the key's count after, 0 when it held the limit already, -1 when no bank
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
local count = redis.call('LLEN', KEYS[2])
if count >= tonumber(ARGV[3]) then return 0 end
redis.call('SADD', KEYS[3], ARGV[4])
return redis.call('RPUSH', KEYS[2], ARGV[2])
"""


class RedisMemory:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._add_bank = client.register_script(ADD_BANK)
        self._add_entry = client.register_script(ADD_ENTRY)

    def add_bank(self, bank: MemoryBank, limit: int) -> bool:
        with redis_errors():
            added = self._add_bank(
                keys=[keys.memory_banks(bank.org)], args=[bank.bank_id, bank.to_json(), limit]
            )
        return bool(int(added))

    def get_bank(self, org: str, bank_id: str) -> MemoryBank | None:
        with redis_errors():
            body: Any = self._redis.hget(keys.memory_banks(org), bank_id)
        return MemoryBank.from_json(str(body)) if body is not None else None

    def list_banks(self, org: str) -> list[MemoryBank]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.memory_banks(org))
        found = [MemoryBank.from_json(str(body)) for body in bodies]
        return sorted(found, key=lambda b: (b.created_at, b.bank_id))

    def delete_bank(self, org: str, bank_id: str) -> bool:
        with redis_errors():
            if not self._redis.hdel(keys.memory_banks(org), bank_id):
                return False
            members: Any = self._redis.smembers(keys.memory_keys(org, bank_id))
            lists = [keys.memory_entries(org, bank_id, key) for key in members]
            self._redis.delete(keys.memory_keys(org, bank_id), *lists)
        return True

    def add_entry(self, entry: MemoryEntry, limit: int) -> int | None:
        with redis_errors():
            count = int(
                self._add_entry(
                    keys=[
                        keys.memory_banks(entry.org),
                        keys.memory_entries(entry.org, entry.bank_id, entry.key),
                        keys.memory_keys(entry.org, entry.bank_id),
                    ],
                    args=[entry.bank_id, entry.to_json(), limit, entry.key],
                )
            )
        return None if count < 0 else count

    def entries(
        self, org: str, bank_id: str, key: str, *, newest_first: bool, limit: int
    ) -> tuple[list[MemoryEntry], int]:
        name = keys.memory_entries(org, bank_id, key)
        with redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            if newest_first:
                pipe.lrange(name, -limit, -1)
            else:
                pipe.lrange(name, 0, limit - 1)
            pipe.llen(name)
            bodies, total = pipe.execute()
        found = [MemoryEntry.from_json(str(body)) for body in bodies]
        return (found[::-1] if newest_first else found), int(total)
