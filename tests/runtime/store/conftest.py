"""Both store backends, one concern bundle each; Redis on a private server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.seams.stores import Stores
from runtime.store.redis import open_redis
from runtime.store.sqlite import open_sqlite
from tests.redis_server import RedisServer


@dataclass
class Subject:
    store: Stores
    advance: Callable[[float], None]
    """Let time pass for lease TTLs (a test clock for SQLite; real time for Redis)."""


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    if request.param == "sqlite":
        now = [1000.0]

        def advance(seconds: float) -> None:
            now[0] += seconds

        sqlite = open_sqlite(tmp_path / "state" / "siesta.db", clock=lambda: now[0])
        yield Subject(sqlite, advance)
        sqlite.close()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        redis_stores = open_redis(server.url)
        yield Subject(redis_stores, time.sleep)  # Redis expires keys on its own clock
        redis_stores.close()


@pytest.fixture
def store(subject: Subject) -> Stores:
    return subject.store
