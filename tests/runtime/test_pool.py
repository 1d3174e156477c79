"""The warm pool sized by demand, on the fake provider and SQLite: it grows under a
stream of arrivals, shrinks when they stop, leaves the engine to first operations
above its low-water mark, and counts against the host."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.images.catalog import CatalogContents, CatalogImage, ImageCatalog
from runtime.providers.fake import FakeProvider
from runtime.seams.stores import Stores
from runtime.sessions.gate import MakeGate
from runtime.sessions.pool import WarmPool
from runtime.sessions.settings import CapacitySettings, PoolSettings
from runtime.store.sqlite import open_sqlite
from tests.manual_clock import ManualClock

IMAGE = CatalogImage(id="debian-base", title="Base", image="siesta/debian-base:1")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Stores]:
    sqlite = open_sqlite(tmp_path / "siesta.db")
    yield sqlite
    sqlite.close()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[FakeProvider]:
    fake = FakeProvider(tmp_path / "sandboxes")
    yield fake
    fake.close()


def make_pool(
    tmp_path: Path,
    store: Stores,
    provider: FakeProvider,
    clock: ManualClock,
    gate: MakeGate | None = None,
    capacity: CapacitySettings | None = None,
    catalog: ImageCatalog | None = None,
    **settings: object,
) -> WarmPool:
    pool_settings = PoolSettings.model_validate(
        {"min_per_image": 2, "surge_seconds": 10, "headroom": 1.5, **settings}
    )
    return WarmPool(
        store.pool,
        store.capacity,
        provider,
        catalog or ImageCatalog([IMAGE], tmp_path),
        pool_settings,
        capacity or CapacitySettings(host_id="h"),
        gate or MakeGate(concurrency=2, queue_limit=10),
        clock=clock.time,
    )


def ready(store: Stores) -> int:
    return len(store.pool.pool_members())


def run_now(make: Callable[[], None]) -> None:
    make()


def test_the_pool_grows_under_a_stream_of_arrivals_and_shrinks_when_it_stops(
    tmp_path: Path, store: Stores, provider: FakeProvider
) -> None:
    clock = ManualClock(start=1000.0)
    pool = make_pool(tmp_path, store, provider, clock)
    pool.refill()
    assert ready(store) == 2  # quiet: the floor

    claimed = []
    for _ in range(8):  # eight new conversations within four seconds
        claimed.append(pool.claim(IMAGE))
        clock.advance(0.5)
    assert [member is not None for member in claimed] == [True, True] + [False] * 6
    pool.refill()
    assert pool.targets() == {IMAGE.key: 12}  # 8 in a surge, times 1.5
    assert ready(store) == 12

    clock.advance(301)  # nothing arrived for longer than the window
    pool.refill()
    assert pool.targets() == {IMAGE.key: 2}
    assert ready(store) == 2
    # The surplus is gone from the engine too: the two members and the two claimed.
    assert len(provider.lifecycle.list_sandboxes()) == 4


def test_above_the_low_water_mark_refills_wait_for_a_gap_in_first_operations(
    tmp_path: Path, store: Stores, provider: FakeProvider
) -> None:
    gate = MakeGate(concurrency=2, queue_limit=10)  # low water: 2 members
    pool = make_pool(
        tmp_path, store, provider, ManualClock(), gate, min_per_image=6, refill_quiet_seconds=0
    )
    serving, done = threading.Event(), threading.Event()

    def first_operation() -> None:
        with gate.turn():
            serving.set()
            done.wait(10)

    conversation = threading.Thread(target=first_operation)
    conversation.start()
    serving.wait(5)
    started_while_serving = pool.refill_step(run_now)
    done.set()
    conversation.join()
    started_after = pool.refill_step(run_now)

    assert started_while_serving == 2  # up to the low-water mark, even while serving
    assert started_after == 4  # the rest once the conversation had its sandbox
    assert ready(store) == 6


def test_members_count_against_the_host_and_never_pass_it(
    tmp_path: Path, store: Stores, provider: FakeProvider
) -> None:
    capacity = CapacitySettings(host_id="h", max_active_per_host=3)
    pool = make_pool(tmp_path, store, provider, ManualClock(), capacity=capacity, min_per_image=5)
    pool.refill()
    assert ready(store) == 3
    assert len(store.capacity.slot_members("host:h")) == 3


def test_every_first_operation_is_an_arrival_hit_or_miss(
    tmp_path: Path, store: Stores, provider: FakeProvider
) -> None:
    clock = ManualClock(start=500.0)
    pool = make_pool(tmp_path, store, provider, clock, min_per_image=0)
    assert pool.claim(IMAGE) is None
    clock.advance(1)
    assert pool.claim(IMAGE) is None
    assert store.pool.pool_arrivals(IMAGE.key, since=0) == [500.0, 501.0]


def test_a_disabled_pool_makes_nothing_and_notes_nothing(
    tmp_path: Path, store: Stores, provider: FakeProvider
) -> None:
    pool = make_pool(tmp_path, store, provider, ManualClock(), enabled=False)
    assert pool.refill() == 0 and pool.claim(IMAGE) is None
    assert store.pool.pool_arrivals(IMAGE.key, since=0) == []
    assert provider.lifecycle.list_sandboxes() == []


def test_a_member_whose_image_is_withdrawn_while_it_is_made_never_joins_the_pool(
    tmp_path: Path, store: Stores, provider: FakeProvider
) -> None:
    # The catalog as the store holds it: an operator disables the image meanwhile.
    live = [IMAGE]
    catalog = ImageCatalog.live(lambda: CatalogContents(live, {}), tmp_path)
    pool = make_pool(tmp_path, store, provider, ManualClock(), catalog=catalog)
    launched: list[Callable[[], None]] = []
    assert pool.refill_step(launched.append) == 2  # two members on their way
    live[:] = [IMAGE.model_copy(update={"enabled": False})]
    assert pool.trim() == []  # nothing ready to trim yet
    for make in launched:
        make()
    assert ready(store) == 0
    assert provider.lifecycle.list_sandboxes() == []
    assert store.capacity.slot_members("pool") == []  # their slots were given back
