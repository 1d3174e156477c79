"""Leases: renewal while working, loss detected in time, waiting for a busy one.

Time is a manual clock shared by the leases and the store: the tests step it and
look, so nothing here depends on how busy the machine is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.core.errors import SessionBusy, StateUnavailable
from runtime.seams.stores import Stores
from runtime.sessions.leases import Leases
from runtime.sessions.settings import LeaseSettings
from runtime.store.sqlite import open_sqlite
from runtime.store.sqlite.leases import SqliteLeases
from tests.manual_clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[Stores]:
    stores = open_sqlite(tmp_path / "siesta.db", clock=clock.time)
    yield stores
    stores.close()


class UnreachableAfterAcquire:
    """The store goes away (Redis down) once the lease is held."""

    def __init__(self, leases: SqliteLeases) -> None:
        self._leases = leases

    def __getattr__(self, name: str) -> object:
        return getattr(self._leases, name)

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        msg = "store down"
        raise StateUnavailable(msg)


def test_a_long_operation_keeps_its_lease_past_the_ttl(store: Stores, clock: ManualClock) -> None:
    leases = Leases(store.leases, LeaseSettings(ttl_seconds=0.3, wait_seconds=0), clock)
    with leases.hold("o/c") as lease:
        for _ in range(8):  # four TTLs in steps of half a TTL
            clock.advance(0.15)
            clock.settle(1)  # the renewer did what was due
            with pytest.raises(SessionBusy), leases.try_hold("o/c"):
                pass
        assert not lease.lost.is_set()
    with leases.try_hold("o/c"):
        pass


def test_a_lease_taken_away_is_lost_and_on_lost_runs(store: Stores, clock: ManualClock) -> None:
    leases = Leases(store.leases, LeaseSettings(ttl_seconds=0.6), clock)
    called = threading.Event()
    with leases.hold("o/c", on_lost=called.set) as lease:
        store.leases.release_lease("o/c", lease.owner)  # e.g. expired and taken over meanwhile
        clock.settle(1)
        assert not called.is_set()
        clock.advance(0.25)  # the next renewal (every third of the TTL) finds it gone
        assert called.wait(10)
        assert lease.lost.is_set()


def test_an_unreachable_store_means_lost_a_quarter_ttl_before_it_runs_out(
    store: Stores, clock: ManualClock
) -> None:
    unreachable = UnreachableAfterAcquire(store.leases)  # type: ignore[arg-type]
    leases = Leases(unreachable, LeaseSettings(ttl_seconds=0.8), clock)  # type: ignore[arg-type]
    called = threading.Event()
    with leases.hold("o/c", on_lost=called.set) as lease:
        for _ in range(2):  # renewals at a third of the TTL fail, and are retried
            clock.settle(1)
            clock.advance(0.27)
        clock.settle(1)
        assert not called.is_set()  # 0.54 s in: the lease is still good
        clock.advance(0.07)  # past 0.6 s: only a quarter of the TTL is left
        assert called.wait(10)
        assert lease.lost.is_set()


def test_a_waiter_gets_the_lease_when_it_is_released_not_when_it_expires(
    store: Stores, clock: ManualClock
) -> None:
    leases = Leases(store.leases, LeaseSettings(ttl_seconds=30, wait_seconds=10), clock)
    waiting, got_it = threading.Event(), threading.Event()

    def wait_for_it() -> None:
        waiting.set()
        with leases.hold("o/c"):
            got_it.set()

    with leases.hold("o/c"):
        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        assert waiting.wait(10)
        assert not got_it.wait(0.3)  # held: the waiter waits
    waiter.join(10)
    assert got_it.is_set()  # woken by the release; the clock never moved towards the TTL
