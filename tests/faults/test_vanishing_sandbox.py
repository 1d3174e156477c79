"""A container that disappears between the state check and the engine call.

The race is made deterministic by a provider wrapper that removes the container
(through Docker itself) just before it passes a call on. Whatever the call, the
caller sees ``sandbox_unavailable`` with "try again", never a raw Docker error;
the next operation makes the sandbox again around its workspace (which a removed
container leaves); a reconciliation pass reports the one failure and goes on with
the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from runtime.core import metrics
from runtime.core.context import CallContext
from runtime.core.errors import SandboxUnavailable
from runtime.images.catalog import ImageCatalog
from runtime.providers.docker.engine_exec import EngineExec
from runtime.providers.docker.inside import DockerInside
from runtime.providers.docker.lifecycle import DockerLifecycle
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import ExecRequest, SandboxProvider, SandboxSpec
from runtime.services import assemble_sessions
from runtime.sessions.lifecycle import Lifecycle
from runtime.sessions.reconcile import Reconciler
from runtime.sessions.settings import LifecycleSettings, ReconcileSettings
from runtime.settings import Settings
from runtime.store.sqlite import open_sqlite
from tests.helpers import REPO, TEST_DEPLOYMENT, TEST_RUN_ID, TEST_RUN_LABEL

pytestmark = pytest.mark.docker


class Vanisher:
    """Removes the container right before the named calls reach the engine."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self.vanish_before: set[str] = set()

    def __call__(self, call: str, sandbox_id: str) -> None:
        if call in self.vanish_before:
            self.vanish_before.discard(call)
            self._client.containers.get(sandbox_id).remove(force=True)


class VanishingLifecycle(DockerLifecycle):
    def __init__(self, vanish: Vanisher) -> None:
        super().__init__(
            SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}),
            deployment_id=TEST_DEPLOYMENT,
        )
        self._vanish = vanish

    def pause(self, sandbox_id: str) -> None:
        self._vanish("pause", sandbox_id)
        super().pause(sandbox_id)

    def unpause(self, sandbox_id: str) -> None:
        self._vanish("unpause", sandbox_id)
        super().unpause(sandbox_id)

    def stop(self, sandbox_id: str) -> None:
        self._vanish("stop", sandbox_id)
        super().stop(sandbox_id)

    def start(self, sandbox_id: str) -> None:
        self._vanish("start", sandbox_id)
        super().start(sandbox_id)


class VanishingInside(DockerInside):
    def __init__(self, lifecycle: DockerLifecycle, vanish: Vanisher) -> None:
        super().__init__(lifecycle.channels, EngineExec(lifecycle.api))
        self._vanish = vanish

    def exec(self, sandbox_id: str, request: ExecRequest) -> Any:
        self._vanish("exec", sandbox_id)
        return super().exec(sandbox_id, request)

    def list_dir(self, sandbox_id: str, path: str, max_entries: int) -> Any:
        self._vanish("list_dir", sandbox_id)
        return super().list_dir(sandbox_id, path, max_entries)


class VanishingProvider(SandboxProvider):
    """The Docker provider, whose container vanishes before the calls named in
    ``vanish_before``."""

    def __init__(self, client: docker.DockerClient) -> None:
        vanish = Vanisher(client)
        self.vanish_before = vanish.vanish_before
        lifecycle = VanishingLifecycle(vanish)
        super().__init__(lifecycle, VanishingInside(lifecycle, vanish))


@pytest.fixture
def provider(docker_client: docker.DockerClient) -> Iterator[VanishingProvider]:
    vanishing = VanishingProvider(docker_client)
    yield vanishing
    vanishing.close()


def ctx(conversation: str) -> CallContext:
    return CallContext("org-v", "user-v", conversation, base_image="debian-base")


@pytest.mark.parametrize(
    ("call", "action"),
    [
        ("exec", lambda p, s: p.inside.exec(s, ExecRequest("true", 10, 1024, 1))),
        ("list_dir", lambda p, s: p.inside.list_dir(s, ".", 10)),
        ("pause", lambda p, s: p.lifecycle.pause(s)),
        ("stop", lambda p, s: p.lifecycle.stop(s)),
    ],
)
def test_every_call_on_a_vanished_container_is_sandbox_unavailable(
    provider: VanishingProvider, call: str, action: Callable[[SandboxProvider, str], object]
) -> None:
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(f"vanish-{call}-{TEST_RUN_ID}", "siesta/debian-base:1", {})
    )
    try:
        provider.vanish_before.add(call)
        with pytest.raises(SandboxUnavailable, match="try again"):
            action(provider, sandbox_id)
    finally:
        provider.lifecycle.destroy(sandbox_id)


def test_the_call_that_loses_its_sandbox_says_try_again_and_the_next_one_brings_it_back(
    provider: VanishingProvider, tmp_path: Path
) -> None:
    store = open_sqlite(tmp_path / "siesta.db")
    catalog = ImageCatalog.load(REPO / "images" / "catalog.yaml")
    sessions, _, _, _ = assemble_sessions(store, provider, catalog, Settings())
    try:
        with sessions.operation(ctx("c1")) as first:
            sandbox_id = first.record.sandbox_id
        provider.vanish_before.add("exec")
        with (
            pytest.raises(SandboxUnavailable, match="try again"),
            sessions.operation(ctx("c1")) as session,
        ):
            provider.inside.exec(session.record.sandbox_id, ExecRequest("true", 10, 1024, 1))
        with sessions.operation(ctx("c1")) as again:
            result = provider.inside.exec(
                again.record.sandbox_id, ExecRequest("echo ok", 10, 1024, 1)
            )
        assert again.workspace_reset is False and again.sandbox_recreated is True
        assert again.record.sandbox_id == sandbox_id
        assert result.stdout.text == "ok\n"
        with sessions.operation(ctx("c1")) as last:
            provider.lifecycle.destroy(last.record.sandbox_id)
    finally:
        sessions.close()
        store.close()


def test_a_pass_reports_the_vanished_sandbox_and_reconciles_the_others(
    provider: VanishingProvider, tmp_path: Path
) -> None:
    store = open_sqlite(tmp_path / "siesta.db")
    catalog = ImageCatalog.load(REPO / "images" / "catalog.yaml")
    now = [1_000_000.0]
    tiers = LifecycleSettings(pause_after_seconds=10, stop_after_seconds=1000)
    settings = Settings(lifecycle=tiers)
    sessions, leases, _, _ = assemble_sessions(store, provider, catalog, settings, lambda: now[0])
    reconciler = Reconciler(
        store.sessions,
        store.deletions,
        provider,
        leases,
        Lifecycle(store.sessions, store.capacity, provider, settings.capacity),
        tiers,
        ReconcileSettings(),
        lambda key, lease: None,
        clock=lambda: now[0],
    )
    sandboxes = []
    try:
        for conversation in ("a", "b"):
            with sessions.operation(ctx(conversation)) as session:
                sandboxes.append(session.record.sandbox_id)
        now[0] += 60  # both are idle past the pause tier
        provider.vanish_before.add("pause")  # the first pause finds its container gone
        errors_before = _reconcile_errors("item")
        report = reconciler.run()
        assert len(report.errors) == 1 and "sandbox_unavailable" in report.errors[0]
        assert len(report.actions["idle_sessions_paused"]) == 2  # both tried, one failed
        assert _reconcile_errors("item") == errors_before + 1
        statuses = sorted(r.status.value for r in store.sessions.list_sessions())
        assert statuses == ["active", "paused"]
        # The next pass finds the vanished one's workspace still there: stopped, not lost.
        report = reconciler.run()
        assert report.errors == [] and len(report.actions["stopped_sandboxes_noted"]) == 1
        assert "sessions_marked_lost" not in report.actions
    finally:
        for sandbox_id in sandboxes:
            provider.lifecycle.destroy(sandbox_id)
        sessions.close()
        store.close()


def _reconcile_errors(stage: str) -> float:
    value = metrics.REGISTRY.get_sample_value("siesta_reconcile_errors_total", {"stage": stage})
    return value or 0.0
