"""Reconciliation and resume rules, fast: fake provider, SQLite, a test clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import ResumeTimeout
from runtime.core.metrics import REGISTRY
from runtime.core.records import SessionStatus
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.fake import FakeLifecycle, FakeProvider
from runtime.services import assemble_sessions
from runtime.sessions.lifecycle import Lifecycle
from runtime.sessions.manager import SessionManager
from runtime.sessions.reconcile import Reconciler, Report, reconcile_forever
from runtime.sessions.settings import LifecycleSettings, ReconcileSettings
from runtime.settings import Settings
from runtime.store.sqlite import open_sqlite

TIERS = LifecycleSettings(
    pause_after_seconds=10,
    stop_after_seconds=20,
    retire_after_seconds=30,
    resume_timeout_seconds=0.2,
)


class World:
    def __init__(self, root: Path, provider: FakeProvider) -> None:
        self.now = [1000.0]
        self.store = open_sqlite(root / "siesta.db")
        self.provider = provider
        catalog = ImageCatalog([CatalogImage(id="img", title="img", image="none")], root)
        settings = Settings(lifecycle=TIERS)
        self.sessions: SessionManager
        self.sessions, leases, _, _ = assemble_sessions(
            self.store, provider, catalog, settings, clock=self.clock
        )
        lifecycle = Lifecycle(self.store.sessions, self.store.capacity, provider, settings.capacity)
        self.reconciler = Reconciler(
            self.store.sessions,
            self.store.deletions,
            provider,
            leases,
            lifecycle,
            TIERS,
            ReconcileSettings(),
            lambda key, lease: None,
            clock=self.clock,
        )

    def clock(self) -> float:
        return self.now[0]

    def use(self, conversation: str) -> str | None:
        with self.sessions.operation(CallContext("o", "u", conversation, base_image="img")) as s:
            return s.resumed

    def status(self, conversation: str) -> SessionStatus:
        record = self.store.sessions.get_session("o", conversation)
        assert record is not None
        return record.status


class SlowResume(FakeLifecycle):
    def start(self, sandbox_id: str) -> None:
        time.sleep(1)
        super().start(sandbox_id)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    provider = FakeProvider(tmp_path / "sandboxes")
    w = World(tmp_path, provider)
    yield w
    w.sessions.close()
    w.store.close()
    provider.close()


def test_idle_tiers_follow_the_time_since_the_last_operation(world: World) -> None:
    world.use("c")
    for advance, expected in (
        (9, SessionStatus.ACTIVE),
        (2, SessionStatus.PAUSED),
        (10, SessionStatus.STOPPED),
        (10, SessionStatus.RETIRED),
    ):
        world.now[0] += advance
        world.reconciler.run()
        assert world.status("c") is expected


def test_a_leased_session_is_never_touched_however_idle(world: World) -> None:
    world.use("c")
    world.now[0] += 100
    inside, release = threading.Event(), threading.Event()

    def long_operation() -> None:
        with world.sessions.operation(CallContext("o", "u", "c", base_image="img")):
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=long_operation)
    worker.start()
    assert inside.wait(5)
    report = world.reconciler.run()
    release.set()
    worker.join()
    assert report.skipped == ["o/c"] and not report.actions
    assert world.status("c") is SessionStatus.ACTIVE


def test_two_passes_at_once_do_no_harm(world: World) -> None:
    for name in ("a", "b", "c"):
        world.use(name)
    world.now[0] += 15
    reports = []
    threads = [
        threading.Thread(target=lambda: reports.append(world.reconciler.run())) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    paused = [sid for r in reports for sid in r.actions.get("idle_sessions_paused", [])]
    assert sorted(paused) == sorted(
        r.session_id for r in world.store.sessions.list_sessions()
    )  # each session paused once, by one pass or the other


def test_resume_from_each_tier(world: World) -> None:
    world.use("c")
    world.now[0] += 11
    world.reconciler.run()
    assert world.use("c") == "paused"
    world.now[0] += 21
    world.reconciler.run()
    assert world.status("c") is SessionStatus.STOPPED
    assert world.use("c") == "stopped"
    assert world.status("c") is SessionStatus.ACTIVE


def test_a_slow_resume_fails_with_the_limit(tmp_path: Path) -> None:
    provider = FakeProvider(lifecycle=SlowResume(tmp_path / "sandboxes"))
    world = World(tmp_path, provider)
    world.use("c")
    world.now[0] += 21
    world.reconciler.run()
    with pytest.raises(ResumeTimeout) as caught:
        world.use("c")
    assert caught.value.fields["limit"] == 0.2
    world.sessions.close()
    world.store.close()
    provider.close()


class BrokenPause(FakeLifecycle):
    """A provider bug: pausing one sandbox raises something no one translated."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.broken: set[str] = set()

    def pause(self, sandbox_id: str) -> None:
        if sandbox_id in self.broken:
            msg = "unexpected provider failure"
            raise RuntimeError(msg)
        super().pause(sandbox_id)


def test_an_unexpected_failure_on_one_session_does_not_end_the_pass(tmp_path: Path) -> None:
    provider = FakeProvider(lifecycle=BrokenPause(tmp_path / "sandboxes"))
    world = World(tmp_path, provider)
    for name in ("a", "b", "c"):
        world.use(name)
    broken = world.store.sessions.get_session("o", "b")
    assert broken is not None
    provider.lifecycle.broken.add(broken.sandbox_id)
    world.now[0] += 11
    report = world.reconciler.run()
    assert [e.split(":")[0] for e in report.errors] == ["o/b"]
    assert "RuntimeError" in report.errors[0]
    assert [world.status(n) for n in ("a", "b", "c")] == [
        SessionStatus.PAUSED,
        SessionStatus.ACTIVE,
        SessionStatus.PAUSED,
    ]
    world.sessions.close()
    world.store.close()
    provider.close()


def test_the_background_loop_outlives_a_failing_pass() -> None:
    passes: list[str] = []

    async def run_pass() -> Report:
        passes.append("pass")
        if len(passes) == 1:
            msg = "the first pass breaks"
            raise RuntimeError(msg)
        if len(passes) == 3:
            raise asyncio.CancelledError  # how the service stops the loop
        return Report(dry_run=False)

    before = REGISTRY.get_sample_value("siesta_reconcile_errors_total", {"stage": "pass"}) or 0
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(reconcile_forever(run_pass, interval_seconds=0))
    after = REGISTRY.get_sample_value("siesta_reconcile_errors_total", {"stage": "pass"})
    assert passes == ["pass"] * 3  # the loop went on after the failure
    assert after == before + 1
