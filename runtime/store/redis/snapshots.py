"""Snapshot records in Redis: a hash per org (id → the record as JSON) and one hash of
every snapshot's org; adding checks the org's count in the same script."""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.records import SnapshotRecord
from runtime.store import keys
from runtime.store.redis.client import redis_errors

ADD_SNAPSHOT = """
-- KEYS[1] the org's snapshots hash, KEYS[2] the id -> org hash
-- ARGV[1] snapshot id, ARGV[2] the record as JSON, ARGV[3] the org, ARGV[4] the limit
-- returns 1 when added, 0 when the org has the limit's count already
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"""


class RedisSnapshots:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._add = client.register_script(ADD_SNAPSHOT)

    def add_snapshot(self, record: SnapshotRecord, limit: int) -> bool:
        with redis_errors():
            added = self._add(
                keys=[keys.snapshots(record.org), keys.SNAPSHOT_ORGS],
                args=[record.snapshot_id, record.to_json(), record.org, limit],
            )
        return bool(int(added))

    def get_snapshot(self, org: str, snapshot_id: str) -> SnapshotRecord | None:
        with redis_errors():
            body: Any = self._redis.hget(keys.snapshots(org), snapshot_id)
        return SnapshotRecord.from_json(str(body)) if body is not None else None

    def list_snapshots(self, org: str) -> list[SnapshotRecord]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.snapshots(org))
        found = [SnapshotRecord.from_json(str(body)) for body in bodies]
        return sorted(found, key=lambda s: (s.created_at, s.snapshot_id))

    def delete_snapshot(self, org: str, snapshot_id: str) -> SnapshotRecord | None:
        record = self.get_snapshot(org, snapshot_id)
        with redis_errors():
            if record is None or not self._redis.hdel(keys.snapshots(org), snapshot_id):
                return None  # none, another org's, or deleted meanwhile by another call
            self._redis.hdel(keys.SNAPSHOT_ORGS, snapshot_id)
        return record

    def snapshot_ids(self) -> set[str]:
        with redis_errors():
            ids: Any = self._redis.hkeys(keys.SNAPSHOT_ORGS)
        return {str(i) for i in ids}
