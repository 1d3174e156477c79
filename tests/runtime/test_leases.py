"""Leases: renewal while working, loss detected in time, waiting for a busy one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.config import LeaseSettings
from runtime.errors import SessionBusy, StateUnavailable
from runtime.leases import Leases
from runtime.store.sqlite import SqliteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    sqlite = SqliteStore(tmp_path / "siesta.db")
    yield sqlite
    sqlite.close()


class UnreachableAfterAcquire(SqliteStore):
    """The store goes away (Redis down) once the lease is held."""

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        msg = "store down"
        raise StateUnavailable(msg)


def test_a_long_operation_keeps_its_lease_past_the_ttl(store: SqliteStore) -> None:
    leases = Leases(store, LeaseSettings(ttl_seconds=0.3, wait_seconds=0))
    with leases.hold("o/c") as lease:
        for _ in range(8):  # 1.2 s: four TTLs
            time.sleep(0.15)
            with pytest.raises(SessionBusy), leases.try_hold("o/c"):
                pass
        assert not lease.lost.is_set()
    with leases.try_hold("o/c"):
        pass


def test_a_lease_taken_away_is_lost_and_on_lost_runs(store: SqliteStore) -> None:
    leases = Leases(store, LeaseSettings(ttl_seconds=0.6))
    called = threading.Event()
    with leases.hold("o/c", on_lost=called.set) as lease:
        store.release_lease("o/c", lease.owner)  # e.g. expired and taken over meanwhile
        assert called.wait(2)
        assert lease.lost.is_set()


def test_an_unreachable_store_means_lost_before_the_ttl_runs_out(tmp_path: Path) -> None:
    store = UnreachableAfterAcquire(tmp_path / "siesta.db")
    leases = Leases(store, LeaseSettings(ttl_seconds=0.8))
    called = threading.Event()
    started = time.monotonic()
    with leases.hold("o/c", on_lost=called.set) as lease:
        assert called.wait(3)
        elapsed = time.monotonic() - started
        assert lease.lost.is_set()
    # Declared lost with a quarter of the TTL to spare, so no one else can hold it yet.
    assert 0.4 <= elapsed < 0.8
    store.close()


def test_a_waiter_gets_the_lease_as_soon_as_it_is_released(store: SqliteStore) -> None:
    leases = Leases(store, LeaseSettings(ttl_seconds=30, wait_seconds=10))
    got_it = threading.Event()
    waited: list[float] = []

    def wait_for_it() -> None:
        started = time.monotonic()
        with leases.hold("o/c"):
            waited.append(time.monotonic() - started)
            got_it.set()

    with leases.hold("o/c"):
        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        time.sleep(0.3)
        assert not got_it.is_set()
    waiter.join(5)
    assert got_it.is_set()
    assert 0.3 <= waited[0] < 1.0  # woken by the release, not by the 30 s TTL
