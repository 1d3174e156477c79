"""Conversation files' metadata in Redis."""

from __future__ import annotations

from dataclasses import asdict

import redis

from runtime.core.records import FileKind, FileRecord, StagingCount, conversation_key
from runtime.store import keys
from runtime.store.redis.client import pairs, redis_errors, strings

DELETE_FILES = """
-- KEYS[1] the conversation's file index, KEYS[2] its staging hash;
-- ARGV[1] the prefix of file keys
-- returns each deleted file as field, value, ...
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. id
  out[#out + 1] = redis.call('HGETALL', key)
  redis.call('DEL', key)
end
redis.call('DEL', KEYS[1], KEYS[2])
return out
"""

COUNT_STAGED = """
-- KEYS[1] the conversation's staging hash; ARGV[1] session id, ARGV[2] limit,
-- ARGV[3..] staging key, bytes, staging key, bytes, ...
-- returns {accepted (1/0), total after (or unchanged), bytes of the keys not yet counted}
if redis.call('HGET', KEYS[1], '=session') ~= ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], '=session', ARGV[1], '=total', 0)
end
local total = tonumber(redis.call('HGET', KEYS[1], '=total'))
local added, new = 0, {}
for i = 3, #ARGV, 2 do
  local field = 'f:' .. ARGV[i]
  if redis.call('HEXISTS', KEYS[1], field) == 0 and not new[field] then
    new[field] = ARGV[i + 1]
    added = added + tonumber(ARGV[i + 1])
  end
end
if total + added > tonumber(ARGV[2]) then return {0, total, added} end
for field, size in pairs(new) do redis.call('HSET', KEYS[1], field, size) end
redis.call('HSET', KEYS[1], '=total', total + added)
return {1, total + added, added}
"""

REPLACE_FILE = """
-- KEYS[1] file hash; ARGV[1] org, ARGV[2] conversation, ARGV[3] size, ARGV[4] type, ARGV[5] sha256
-- returns 1 when updated, 0 when no such file in that conversation
if redis.call('HGET', KEYS[1], 'org') ~= ARGV[1]
   or redis.call('HGET', KEYS[1], 'conversation') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'size', ARGV[3], 'content_type', ARGV[4], 'sha256', ARGV[5])
return 1
"""


class RedisFiles:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._delete_files = client.register_script(DELETE_FILES)
        self._replace_file = client.register_script(REPLACE_FILE)
        self._count_staged = client.register_script(COUNT_STAGED)

    def add_file(self, record: FileRecord) -> None:
        conversation = conversation_key(record.org, record.conversation)
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(
                keys.file(record.file_id),
                mapping={
                    name: str(value)
                    for name, value in asdict(record).items()
                    if value is not None  # an absent field reads back as None
                },
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
        return [_file(strings(row)) for row in rows if row]

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        with redis_errors():
            fields = strings(self._redis.hgetall(keys.file(file_id)))
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
        key = conversation_key(org, conversation)
        with redis_errors():
            rows = self._delete_files(
                keys=[keys.files(key), keys.staged(key)], args=[keys.file("")]
            )
        return [_file(pairs(row)) for row in rows if row]

    def count_staged(
        self, org: str, conversation: str, session_id: str, items: dict[str, int], limit: int
    ) -> StagingCount:
        flat: list[str | int] = [session_id, limit]
        for item, size in items.items():
            flat += [item, size]
        with redis_errors():
            accepted, total, added = self._count_staged(
                keys=[keys.staged(conversation_key(org, conversation))], args=flat
            )
        return StagingCount(accepted=bool(accepted), total=int(total), added=int(added))


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
        message_id=fields.get("message_id"),
    )
