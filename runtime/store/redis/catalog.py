"""The image catalog and its builds in Redis: one hash of image versions, one of
default tags, a record and a log list per build, a sorted set of builds per version."""

from __future__ import annotations

from typing import Any

import redis

from runtime.core.operator_records import ImageBuild
from runtime.store import keys
from runtime.store.redis.client import redis_errors

REPLACE_IMAGE = """
-- KEYS[1] the catalog hash; ARGV[1] ref, ARGV[2] expected JSON, ARGV[3] new JSON
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

APPEND_LOG = """
-- KEYS[1] the build's log list; ARGV[1] how many lines it may hold; ARGV[2..] lines
local held = redis.call('LLEN', KEYS[1])
local room = tonumber(ARGV[1]) - held
local count = 0
for i = 2, #ARGV do
  if count >= room then break end
  redis.call('RPUSH', KEYS[1], ARGV[i])
  count = count + 1
end
return held + count
"""


class RedisCatalog:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._replace = client.register_script(REPLACE_IMAGE)
        self._append = client.register_script(APPEND_LOG)

    def catalog(self) -> tuple[dict[str, str], dict[str, str]]:
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hgetall(keys.CATALOG_IMAGES)
            pipe.hgetall(keys.CATALOG_DEFAULTS)
            images, defaults = pipe.execute()
        return (
            {str(k): str(v) for k, v in images.items()},
            {str(k): str(v) for k, v in defaults.items()},
        )

    def add_image(self, ref: str, body: str) -> bool:
        with redis_errors():
            return bool(self._redis.hsetnx(keys.CATALOG_IMAGES, ref, body))

    def replace_image(self, ref: str, expected: str, body: str) -> bool:
        with redis_errors():
            return bool(int(self._replace(keys=[keys.CATALOG_IMAGES], args=[ref, expected, body])))

    def set_default_tag(self, image_id: str, tag: str, *, only_if_unset: bool = False) -> bool:
        with redis_errors():
            if only_if_unset:
                return bool(self._redis.hsetnx(keys.CATALOG_DEFAULTS, image_id, tag))
            self._redis.hset(keys.CATALOG_DEFAULTS, image_id, tag)
        return True

    def put_build(self, build: ImageBuild) -> None:
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.set(keys.image_build(build.build_id), build.to_json())
            pipe.zadd(keys.image_builds(build.ref), {build.build_id: build.started_at})
            pipe.execute()

    def get_build(self, build_id: str) -> ImageBuild | None:
        with redis_errors():
            body: Any = self._redis.get(keys.image_build(build_id))
        return ImageBuild.from_json(str(body)) if body is not None else None

    def list_builds(self, ref: str, limit: int) -> list[ImageBuild]:
        with redis_errors():
            ids: Any = self._redis.zrevrange(keys.image_builds(ref), 0, limit - 1)
            if not ids:
                return []
            bodies: Any = self._redis.mget([keys.image_build(str(i)) for i in ids])
        return [ImageBuild.from_json(str(b)) for b in bodies if b is not None]

    def append_build_log(self, build_id: str, lines: list[str], keep: int) -> int:
        with redis_errors():
            held = self._append(keys=[keys.image_build_log(build_id)], args=[keep, *lines])
        return int(held)

    def build_log(self, build_id: str, start: int) -> list[str]:
        with redis_errors():
            lines: Any = self._redis.lrange(keys.image_build_log(build_id), start, -1)
        return [str(line) for line in lines]
