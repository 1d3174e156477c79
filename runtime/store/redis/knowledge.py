"""Knowledge bases in Redis (keys in ``runtime/store/keys.py``): a hash of bases per
org, a hash of versions per base, each version's chunks as one serialised string, and
one sorted set of versions waiting for an indexer. Each change that must hold together
(a version added under the base's limit, its chunks stored with its ``ready`` record
and the base's generation, a removal) is one script."""

from __future__ import annotations

import base64
import json
from typing import Any

import redis

from runtime.core.knowledge_records import ContentVersion, KnowledgeBase, KnowledgeChunk
from runtime.store import keys
from runtime.store.redis.client import redis_errors

ADD_BASE = """
-- KEYS[1] the org's bases; ARGV[1] base id, ARGV[2] JSON, ARGV[3] the limit
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

ADD_VERSION = """
-- KEYS[1] the org's bases, KEYS[2] the base's versions, KEYS[3] version → base,
-- KEYS[4] pending; ARGV[1] base id, ARGV[2] version id, ARGV[3] JSON, ARGV[4] the limit,
-- ARGV[5] the pending member, ARGV[6] its score. Returns 1, 0 (limit), -1 (no base).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[5])
return 1
"""

SAVE_VERSION = """
-- KEYS[1] the base's versions, KEYS[2] pending; ARGV[1] version id, ARGV[2] JSON,
-- ARGV[3] the pending member, ARGV[4] 1 when it is done (ready or failed)
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] == '1' then redis.call('ZREM', KEYS[2], ARGV[3]) end
return 1
"""

CLAIM = """
-- KEYS[1] pending; ARGV[1] now, ARGV[2] when a claim taken now goes stale
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1)
if #found == 0 then return false end
redis.call('ZADD', KEYS[1], ARGV[2], found[1])
return found[1]
"""

FINISH = """
-- KEYS[1] the base's versions, KEYS[2] chunk counts, KEYS[3] the version's chunks,
-- KEYS[4] generations, KEYS[5] pending; ARGV[1] version id, ARGV[2] base id,
-- ARGV[3] JSON, ARGV[4] chunks serialised, ARGV[5] their count, ARGV[6] the limit,
-- ARGV[7] the pending member. Returns 1, 0 (limit), -1 (no version).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
local new = tonumber(ARGV[5])
if held - old + new > tonumber(ARGV[6]) then return 0 end
redis.call('SET', KEYS[3], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[1], new)
redis.call('HINCRBY', KEYS[2], ARGV[2], new - old)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
redis.call('ZREM', KEYS[5], ARGV[7])
return 1
"""

DELETE_VERSION = """
-- KEYS[1] the base's versions, KEYS[2] chunk counts, KEYS[3] the version's chunks,
-- KEYS[4] generations, KEYS[5] pending, KEYS[6] version → base;
-- ARGV[1] version id, ARGV[2] base id, ARGV[3] the pending member
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
redis.call('HDEL', KEYS[2], ARGV[1])
if old > 0 then redis.call('HINCRBY', KEYS[2], ARGV[2], 0 - old) end
redis.call('DEL', KEYS[3])
redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
redis.call('ZREM', KEYS[5], ARGV[3])
redis.call('HDEL', KEYS[6], ARGV[1])
return 1
"""


class RedisKnowledge:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._add_base = client.register_script(ADD_BASE)
        self._add_version = client.register_script(ADD_VERSION)
        self._save_version = client.register_script(SAVE_VERSION)
        self._claim = client.register_script(CLAIM)
        self._finish = client.register_script(FINISH)
        self._delete_version = client.register_script(DELETE_VERSION)

    def add_base(self, base: KnowledgeBase, limit: int) -> bool:
        with redis_errors():
            added = self._add_base(
                keys=[keys.knowledge_bases(base.org)], args=[base.base_id, base.to_json(), limit]
            )
        return bool(int(added))

    def get_base(self, org: str, base_id: str) -> KnowledgeBase | None:
        with redis_errors():
            body: Any = self._redis.hget(keys.knowledge_bases(org), base_id)
        return KnowledgeBase.from_json(str(body)) if body is not None else None

    def list_bases(self, org: str) -> list[KnowledgeBase]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.knowledge_bases(org))
        found = [KnowledgeBase.from_json(str(body)) for body in bodies]
        return sorted(found, key=lambda b: (b.created_at, b.base_id))

    def delete_base(self, org: str, base_id: str) -> bool:
        with redis_errors():
            if not self._redis.hdel(keys.knowledge_bases(org), base_id):
                return False
            versions: Any = self._redis.hkeys(keys.knowledge_versions(org, base_id))
            for version_id in versions:
                self._delete_version(
                    keys=self._version_keys(org, base_id, str(version_id)),
                    args=[version_id, base_id, _member(org, str(version_id))],
                )
            self._redis.delete(keys.knowledge_versions(org, base_id))
            self._redis.hdel(keys.knowledge_chunk_counts(org), base_id)
            self._redis.hdel(keys.knowledge_generations(org), base_id)
        return True

    def add_version(self, version: ContentVersion, limit: int) -> bool | None:
        org = version.org
        with redis_errors():
            added = int(
                self._add_version(
                    keys=[
                        keys.knowledge_bases(org),
                        keys.knowledge_versions(org, version.base_id),
                        keys.knowledge_version_bases(org),
                        keys.KNOWLEDGE_PENDING,
                    ],
                    args=[
                        version.base_id,
                        version.version_id,
                        version.to_json(),
                        limit,
                        _member(org, version.version_id),
                        version.created_at,
                    ],
                )
            )
        return None if added < 0 else bool(added)

    def get_version(self, org: str, version_id: str) -> ContentVersion | None:
        with redis_errors():
            base_id: Any = self._redis.hget(keys.knowledge_version_bases(org), version_id)
            if base_id is None:
                return None
            body: Any = self._redis.hget(keys.knowledge_versions(org, str(base_id)), version_id)
        return ContentVersion.from_json(str(body)) if body is not None else None

    def list_versions(self, org: str, base_id: str) -> list[ContentVersion]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.knowledge_versions(org, base_id))
        found = [ContentVersion.from_json(str(body)) for body in bodies]
        return sorted(found, key=lambda v: (v.created_at, v.version_id))

    def save_version(self, version: ContentVersion) -> bool:
        done = "1" if version.status in ("ready", "failed") else "0"
        with redis_errors():
            saved = self._save_version(
                keys=[
                    keys.knowledge_versions(version.org, version.base_id),
                    keys.KNOWLEDGE_PENDING,
                ],
                args=[
                    version.version_id,
                    version.to_json(),
                    _member(version.org, version.version_id),
                    done,
                ],
            )
        return bool(int(saved))

    def claim_version(self, now: float, stale_before: float) -> ContentVersion | None:
        with redis_errors():
            member: Any = self._claim(
                keys=[keys.KNOWLEDGE_PENDING], args=[now, now + (now - stale_before)]
            )
        if member is None:
            return None
        org, _, version_id = str(member).partition("/")
        found = self.get_version(org, version_id)
        if found is None:  # removed after it was listed: nothing to index
            with redis_errors():
                self._redis.zrem(keys.KNOWLEDGE_PENDING, str(member))
            return None
        claimed = found.but(status="indexing", claimed_at=now)
        return claimed if self.save_version(claimed) else None

    def finish_version(
        self, version: ContentVersion, chunks: list[KnowledgeChunk], limit: int
    ) -> bool | None:
        org, base_id = version.org, version.base_id
        with redis_errors():
            done = int(
                self._finish(
                    keys=[
                        keys.knowledge_versions(org, base_id),
                        keys.knowledge_chunk_counts(org),
                        keys.knowledge_chunks(org, version.version_id),
                        keys.knowledge_generations(org),
                        keys.KNOWLEDGE_PENDING,
                    ],
                    args=[
                        version.version_id,
                        base_id,
                        version.to_json(),
                        _serialised(chunks),
                        len(chunks),
                        limit,
                        _member(org, version.version_id),
                    ],
                )
            )
        return None if done < 0 else bool(done)

    def delete_version(self, org: str, base_id: str, version_id: str) -> bool:
        with redis_errors():
            gone = self._delete_version(
                keys=self._version_keys(org, base_id, version_id),
                args=[version_id, base_id, _member(org, version_id)],
            )
        return bool(int(gone))

    def chunks(self, org: str, base_id: str) -> list[KnowledgeChunk]:
        with redis_errors():
            bodies: Any = self._redis.hvals(keys.knowledge_versions(org, base_id))
            ready = sorted(
                v.version_id
                for v in (ContentVersion.from_json(str(b)) for b in bodies)
                if v.status == "ready"
            )
            if not ready:
                return []
            blobs: Any = self._redis.mget([keys.knowledge_chunks(org, v) for v in ready])
        found: list[KnowledgeChunk] = []
        for blob in blobs:
            if blob is not None:
                found.extend(_deserialised(str(blob)))
        return found

    def chunk_count(self, org: str, base_id: str) -> int:
        with redis_errors():
            count: Any = self._redis.hget(keys.knowledge_chunk_counts(org), base_id)
        return int(count or 0)

    def generation(self, org: str, base_id: str) -> int:
        with redis_errors():
            found: Any = self._redis.hget(keys.knowledge_generations(org), base_id)
        return int(found or 0)

    @staticmethod
    def _version_keys(org: str, base_id: str, version_id: str) -> list[str]:
        return [
            keys.knowledge_versions(org, base_id),
            keys.knowledge_chunk_counts(org),
            keys.knowledge_chunks(org, version_id),
            keys.knowledge_generations(org),
            keys.KNOWLEDGE_PENDING,
            keys.knowledge_version_bases(org),
        ]


def _member(org: str, version_id: str) -> str:
    return f"{org}/{version_id}"


def _serialised(chunks: list[KnowledgeChunk]) -> str:
    return json.dumps(
        [
            [c.version_id, c.seq, c.heading, c.text, c.start, base64.b64encode(c.vector).decode()]
            for c in chunks
        ]
    )


def _deserialised(text: str) -> list[KnowledgeChunk]:
    return [
        KnowledgeChunk(str(v), int(seq), str(h), str(t), int(start), base64.b64decode(vector))
        for v, seq, h, t, start, vector in json.loads(text)
    ]
