"""What only the Redis executions log has to get right: entries written before
executions were indexed by conversation are still forgotten with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from runtime.core.records import ExecutionFilter
from runtime.seams.stores import Stores
from runtime.store import keys
from runtime.store.redis import open_redis
from tests.redis_server import RedisServer
from tests.runtime.store.test_executions import execution, pending

pytestmark = pytest.mark.redis


@pytest.fixture
def stores(redis_server: RedisServer) -> Iterator[Stores]:
    redis_server.flush()
    opened = open_redis(redis_server.url)
    yield opened
    opened.close()


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield connection
    connection.close()


def as_an_earlier_version_wrote(client: redis.Redis, org: str, execution_id: str) -> None:
    client.hdel(keys.execution(org, execution_id), "conversation")
    client.delete(keys.conversation_executions(f"{org}/c"))


def test_entries_of_an_earlier_version_are_forgotten_with_their_conversation(
    stores: Stores, client: redis.Redis
) -> None:
    stores.executions.add(execution(1))
    stores.executions.add(pending(2))
    stores.executions.add(execution(3, conversation="d"))
    for execution_id in ("e1", "e2"):
        as_an_earlier_version_wrote(client, "o", execution_id)
    assert stores.executions.forget_conversation("o", "c", 1500.0) == 2
    assert [e.id for e in stores.executions.find("o", ExecutionFilter())] == ["e3"]
    assert stores.executions.cancelled("o", "e2", 1500.0)
    assert client.pttl(keys.cancelled_approval("o", "e2")) > 0  # gone at the deadline


def test_retention_leaves_no_conversation_index_behind(stores: Stores, client: redis.Redis) -> None:
    stores.executions.add(execution(1))
    stores.executions.add(execution(2))
    as_an_earlier_version_wrote(client, "o", "e2")
    client.delete(keys.EXECUTIONS_BY_CONVERSATION_INDEXED)
    assert stores.executions.remove_older_than(9000.0) == 2
    assert client.keys(keys.PREFIX + "conversation-executions:*") == []
    assert client.keys(keys.EXECUTION_PREFIX + "*") == []
