"""SessionManager rules, on the SQLite store, with the fake provider and (for the
rules that take any provider) the Kubernetes one on its API server double."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import (
    CapacityUnavailable,
    ImageNotInCatalog,
    ProvisioningTimeout,
    SandboxDisabled,
    SessionBusy,
    SiestaError,
)
from runtime.core.metrics import REGISTRY
from runtime.core.records import SessionRecord, SessionStatus
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.fake import FakeLifecycle, FakeProvider
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import (
    CONVERSATION_LABEL,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
)
from runtime.seams.stores import Stores
from runtime.services import assemble_sessions
from runtime.sessions.leases import Leases
from runtime.sessions.manager import SessionManager
from runtime.sessions.settings import (
    CapacitySettings,
    LeaseSettings,
    PoolSettings,
    ProvisionSettings,
)
from runtime.settings import Settings
from runtime.store.sqlite import open_sqlite
from tests.runtime.providers.test_contract import kubernetes_provider


def catalog(tmp_path: Path, *, python_enabled: bool = True) -> ImageCatalog:
    return ImageCatalog(
        [
            CatalogImage(id="debian-base", title="Base", image="siesta/debian-base:1"),
            CatalogImage(id="python", title="Py", image="siesta/python:1", enabled=python_enabled),
        ],
        tmp_path,
    )


class SlowFakeLifecycle(FakeLifecycle):
    def __init__(self, root: Path, delay: float) -> None:
        super().__init__(root)
        self.delay = delay
        self.made_for: list[str] = []
        """Conversations in the order their sandboxes began to be made."""

    def create(self, spec: SandboxSpec) -> str:
        self.made_for.append(spec.labels.get(CONVERSATION_LABEL, ""))
        time.sleep(self.delay)
        return super().create(spec)


def slow_fake_provider(root: Path, delay: float) -> FakeProvider:
    return FakeProvider(lifecycle=SlowFakeLifecycle(root, delay))


@pytest.fixture(params=["fake", pytest.param("kubernetes", marks=pytest.mark.docker)])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SandboxProvider]:
    if request.param == "kubernetes":
        kubernetes = kubernetes_provider(request.getfixturevalue("kubernetes_api"))
        yield kubernetes
        for sandbox in kubernetes.lifecycle.list_sandboxes():  # what a test left running
            kubernetes.lifecycle.destroy(sandbox.sandbox_id)
        kubernetes.close()
        return
    fake = FakeProvider(tmp_path / "sandboxes")
    yield fake
    fake.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Stores]:
    sqlite = open_sqlite(tmp_path / "siesta.db")
    yield sqlite
    sqlite.close()


def manager(
    store: Stores,
    provider: SandboxProvider,
    images: ImageCatalog,
    clock: Callable[[], float] = time.time,
    capacity: CapacitySettings | None = None,
    lease: LeaseSettings | None = None,
    provision: ProvisionSettings | None = None,
    **sandbox: object,
) -> SessionManager:
    settings = Settings(
        sandbox=SandboxSettings.model_validate(sandbox),
        capacity=capacity or CapacitySettings(),
        lease=lease or LeaseSettings(),
        provision=provision or ProvisionSettings(),
        pool=PoolSettings(enabled=False),  # no refiller runs here: every claim would miss
    )
    sessions, _, _, _ = assemble_sessions(store, provider, images, settings, clock)
    return sessions


def delete(sessions: SessionManager, context: CallContext, store: Stores) -> object:
    leases = Leases(store.leases, LeaseSettings())
    with leases.hold(context.key) as lease:
        return sessions.teardown(context.org, context.conversation, lease)


def ctx(image: str | None = "debian-base", conversation: str = "c1") -> CallContext:
    return CallContext("org", "user", conversation, base_image=image)


def test_concurrent_first_operations_provision_one_session(tmp_path: Path, store: Stores) -> None:
    provider = slow_fake_provider(tmp_path / "slow", delay=0.2)
    sessions = manager(store, provider, catalog(tmp_path))
    seen: list[str] = []

    def operate() -> None:
        with sessions.operation(ctx()) as active:
            seen.append(active.record.session_id)

    threads = [threading.Thread(target=operate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and len(set(seen)) == 1
    assert len(provider.lifecycle.list_sandboxes()) == 1
    provider.close()


def test_replacement_keeps_the_pinned_image(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path))
    with sessions.operation(ctx("python")) as first:
        pass
    provider.lifecycle.destroy(first.record.sandbox_id)
    with sessions.operation(ctx("debian-base")) as second:
        pass
    assert second.workspace_reset and second.provisioned
    assert second.record.image_id == "python:latest"  # the version: id and tag
    assert second.record.generation == 2
    assert provider.lifecycle.inspect(first.record.sandbox_id).state is SandboxState.MISSING


def test_replacement_falls_back_to_the_current_selection_when_the_pinned_image_is_withdrawn(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    with manager(store, provider, catalog(tmp_path)).operation(ctx("python")) as first:
        pass
    provider.lifecycle.destroy(first.record.sandbox_id)
    withdrawn = manager(store, provider, catalog(tmp_path, python_enabled=False))
    with withdrawn.operation(ctx("debian-base")) as second:
        pass
    assert second.record.image_id == "debian-base:latest"
    # ... and a new conversation cannot pick it.
    with pytest.raises(ImageNotInCatalog), withdrawn.operation(ctx("python", conversation="c2")):
        pass


def test_disabled_sandbox_refuses_before_anything_is_created(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path), enabled=False)
    with pytest.raises(SandboxDisabled), sessions.operation(ctx()):
        pass
    assert provider.lifecycle.list_sandboxes() == [] and store.sessions.list_sessions() == []


def test_slow_provisioning_times_out_and_cleans_up_afterwards(
    tmp_path: Path, store: Stores
) -> None:
    provider = slow_fake_provider(tmp_path / "slow", delay=0.6)
    sessions = manager(store, provider, catalog(tmp_path), provision_timeout_seconds=0.1)
    with pytest.raises(ProvisioningTimeout) as caught, sessions.operation(ctx()):
        pass
    assert caught.value.fields["limit"] == 0.1
    assert "0.1 seconds" in caught.value.message
    assert store.sessions.list_sessions() == []
    time.sleep(0.8)
    assert provider.lifecycle.list_sandboxes() == []
    sessions.close()
    provider.close()


def test_a_burst_larger_than_the_turns_is_served_in_arrival_order_and_none_times_out(
    tmp_path: Path, store: Stores
) -> None:
    # Two turns, twelve first operations: the last waits ~3 s for its turn, longer than
    # the provisioning limit, yet gets its sandbox (waiting is not a slow engine).
    conversations, delay, limit, turns = 12, 0.5, 1.5, 2
    provider = slow_fake_provider(tmp_path / "slow", delay=delay)
    sessions = manager(
        store,
        provider,
        catalog(tmp_path),
        capacity=CapacitySettings(max_active_per_org=100, max_active_per_user=100),
        provision=ProvisionSettings(concurrency=turns),
        provision_timeout_seconds=limit,
    )
    outcomes: dict[str, str] = {}

    def operate(conversation: str) -> None:
        try:
            with sessions.operation(ctx(conversation=conversation)):
                outcomes[conversation] = "provisioned"
        except SiestaError as error:
            outcomes[conversation] = error.code

    lifecycle = provider.lifecycle
    assert isinstance(lifecycle, SlowFakeLifecycle)

    def arrived() -> int:
        """Operations at the gate: waiting in its queue or making their sandbox."""
        waiting = REGISTRY.get_sample_value("siesta_provision_queue") or 0
        return len(lifecycle.made_for) + int(waiting)

    arrivals = [f"c{i:02d}" for i in range(conversations)]
    threads = [threading.Thread(target=operate, args=(c,)) for c in arrivals]
    started = time.monotonic()
    for number, thread in enumerate(threads, start=1):
        thread.start()
        # A definite arrival order: the next starts once this one is at the gate (a
        # fixed pause was not enough on a loaded machine).
        deadline = time.monotonic() + 10
        while arrived() < number:
            assert time.monotonic() < deadline, f"{arrivals[number - 1]} never reached the gate"
            time.sleep(0.002)
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    assert outcomes == dict.fromkeys(arrivals, "provisioned")
    assert elapsed >= conversations * delay / 2 > limit  # they did queue, past the limit
    # First come, first served: each takes its turn in arrival order. Two turns freed at
    # once (their sandboxes took the same time) are taken by the next two in line, who
    # then race to the engine: a neighbour may begin a moment earlier, nobody further.
    for arrival, conversation in enumerate(arrivals):
        began = lifecycle.made_for.index(conversation)
        assert abs(began - arrival) < turns, (conversation, lifecycle.made_for)
    sessions.close()
    provider.close()


def test_a_full_queue_refuses_at_once_naming_its_limit(tmp_path: Path, store: Stores) -> None:
    provider = slow_fake_provider(tmp_path / "slow", delay=1.0)
    sessions = manager(
        store,
        provider,
        catalog(tmp_path),
        provision=ProvisionSettings(concurrency=1, queue_limit=1),
    )
    errors: dict[str, SiestaError] = {}

    def operate(conversation: str) -> None:
        try:
            with sessions.operation(ctx(conversation=conversation)):
                pass
        except SiestaError as error:
            errors[conversation] = error

    threads = [threading.Thread(target=operate, args=(f"q{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
        time.sleep(0.1)  # q0 is being made, q1 waits; q2 finds the queue full
    refused_after = time.monotonic()
    threads[2].join()
    assert time.monotonic() - refused_after < 0.5  # refused at once, not after a wait
    for thread in threads:
        thread.join()

    assert list(errors) == ["q2"]
    error = errors["q2"]
    assert isinstance(error, CapacityUnavailable)
    assert "queue limit of 1" in error.message and "SIESTA_PROVISION__QUEUE_LIMIT" in error.message
    assert error.fields == {"scope": "queue", "limit": 1, "unit": "sandboxes"}
    sessions.close()
    provider.close()


def test_delete_removes_sandbox_and_record(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path))
    with sessions.operation(ctx()) as active:
        pass
    deleted = delete(sessions, ctx(), store)
    assert isinstance(deleted, SessionRecord) and deleted.session_id == active.record.session_id
    assert delete(sessions, ctx(), store) is None
    assert provider.lifecycle.inspect(active.record.sandbox_id).state is SandboxState.MISSING
    assert store.sessions.list_sessions() == []


def test_last_used_is_recorded_at_the_end_of_an_operation(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    now = [1000.0]
    sessions = manager(store, provider, catalog(tmp_path), clock=lambda: now[0])
    with sessions.operation(ctx()):
        now[0] = 1060.0
    record = store.sessions.get_session("org", "c1")
    assert record is not None
    assert (record.created_at, record.last_used_at) == (1000.0, 1060.0)


def user_ctx(user: str, conversation: str, org: str = "org") -> CallContext:
    return CallContext(org, user, conversation, base_image="debian-base")


def test_capacity_suspends_the_least_recently_used_idle_session(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    now = [1000.0]
    sessions = manager(
        store,
        provider,
        catalog(tmp_path),
        clock=lambda: now[0],
        capacity=CapacitySettings(max_active_per_user=2),
    )
    records = {}
    for conversation in ("old", "recent", "new"):
        now[0] += 10
        with sessions.operation(user_ctx("u", conversation)) as active:
            records[conversation] = active.record

    old = store.sessions.get_session("org", "old")
    assert old is not None and old.status is SessionStatus.STOPPED
    assert provider.lifecycle.inspect(old.sandbox_id).state is SandboxState.STOPPED
    assert sorted(store.capacity.slot_members("user:org/u")) == ["org/new", "org/recent"]

    now[0] += 10
    with sessions.operation(user_ctx("u", "old")) as resumed:
        pass
    assert resumed.resumed == "stopped" and not resumed.workspace_reset
    assert resumed.record.session_id == records["old"].session_id
    recent = store.sessions.get_session("org", "recent")
    assert recent is not None and recent.status is SessionStatus.STOPPED  # now the LRU one


def test_capacity_unavailable_names_the_scope_and_limit_when_nothing_is_idle(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    sessions = manager(
        store, provider, catalog(tmp_path), capacity=CapacitySettings(max_active_per_org=1)
    )
    holding = threading.Event()
    release = threading.Event()

    def hold_busy() -> None:
        with sessions.operation(user_ctx("a", "busy")):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold_busy)
    holder.start()
    try:
        assert holding.wait(10)
        with (
            pytest.raises(CapacityUnavailable) as caught,
            sessions.operation(user_ctx("b", "second")),
        ):
            pass
    finally:
        release.set()
        holder.join()
    error = caught.value
    assert (error.fields["scope"], error.fields["limit"]) == ("org", 1)
    assert "org limit of 1 active sandboxes" in error.message
    assert store.sessions.get_session("org", "second") is None
    assert store.capacity.slot_members("org:org") == ["org/busy"]


def test_other_orgs_do_not_count_against_an_org_limit(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    sessions = manager(
        store, provider, catalog(tmp_path), capacity=CapacitySettings(max_active_per_org=1)
    )
    for org in ("a", "b", "c"):
        with sessions.operation(user_ctx("u", "conv", org=org)):
            pass
    assert all(r.status is SessionStatus.ACTIVE for r in store.sessions.list_sessions())


def test_delete_frees_the_slot(tmp_path: Path, store: Stores, provider: SandboxProvider) -> None:
    sessions = manager(store, provider, catalog(tmp_path))
    with sessions.operation(user_ctx("u", "c")):
        pass
    delete(sessions, user_ctx("u", "c"), store)
    assert (
        store.capacity.slot_members("org:org") == []
        and store.capacity.slot_members("user:org/u") == []
    )


def test_a_busy_conversation_waits_then_reports_the_wait_limit(
    tmp_path: Path, store: Stores, provider: SandboxProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path), lease=LeaseSettings(wait_seconds=0.3))
    with sessions.operation(ctx()):
        started = time.monotonic()
        # Same thread, second operation: it must wait for the first, then give up.
        with pytest.raises(SessionBusy) as caught, sessions.operation(ctx()):
            pass
    assert time.monotonic() - started >= 0.3
    assert caught.value.fields["limit"] == 0.3
