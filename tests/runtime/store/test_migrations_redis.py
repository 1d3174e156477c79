"""The Redis store's schema versions: 0.1.0's keys (no version) are upgraded with all
their data, migrations run once and in order across instances starting together, and
a store from a newer release is refused."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from runtime.core.errors import StoreSchemaTooNew
from runtime.store import keys
from runtime.store.redis import open_redis
from runtime.store.redis.migrations import MIGRATIONS, migrate
from tests.redis_server import RedisServer
from tests.runtime.store import release_0_1_0

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    redis_server.flush()
    opened = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield opened
    opened.flushdb()
    opened.close()


def restore(client: redis.Redis, dump: dict[str, dict[str, Any]]) -> None:
    for key, entry in dump.items():
        kind, value = entry["type"], entry["value"]
        if kind == "string":
            client.set(key, value)
        elif kind == "hash":
            client.hset(key, mapping=value)
        elif kind == "set":
            client.sadd(key, *value)
        elif kind == "zset":
            client.zadd(key, {member: score for member, score in value})
        elif kind == "list":
            client.rpush(key, *value)
        else:
            raise AssertionError(kind)


def test_a_0_1_0_store_is_upgraded_with_all_its_data(
    client: redis.Redis, redis_server: RedisServer
) -> None:
    dump = json.loads((release_0_1_0.FIXTURES / "store_v0_redis.json").read_text())
    restore(client, dump)
    assert client.get(keys.SCHEMA_VERSION) is None

    stores = open_redis(redis_server.url)
    try:
        release_0_1_0.assert_all_there(stores)
    finally:
        stores.close()
    assert client.get(keys.SCHEMA_VERSION) == str(len(MIGRATIONS))
    assert client.get(keys.SCHEMA_LOCK) is None


def test_a_store_from_a_newer_release_is_refused_and_left_as_it_was(
    client: redis.Redis, redis_server: RedisServer
) -> None:
    newer = len(MIGRATIONS) + 1
    client.set(keys.SCHEMA_VERSION, newer)
    with pytest.raises(StoreSchemaTooNew) as refused:
        open_redis(redis_server.url)
    assert f"schema version {newer}" in refused.value.message
    assert f"up to {len(MIGRATIONS)}" in refused.value.message
    assert client.get(keys.SCHEMA_VERSION) == str(newer)


def test_instances_starting_together_migrate_once_in_order(client: redis.Redis) -> None:
    ran: list[str] = []

    def slow_step(store: redis.Redis) -> None:
        """2: a test's step, slow enough that the other instances arrive meanwhile."""
        ran.append("slow")
        time.sleep(0.3)

    def start() -> None:
        migrate(client, [*MIGRATIONS, slow_step])

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ran == ["slow"]
    assert client.get(keys.SCHEMA_VERSION) == "2"
    assert client.get(keys.SCHEMA_LOCK) is None
    assert migrate(client, [*MIGRATIONS, slow_step]) == 2
    assert ran == ["slow"]
