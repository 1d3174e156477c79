"""A sandbox is kept while its workspace exists: whatever stops it outside the service,
the next operation brings the same one back with its files (fake provider, and the
Kubernetes provider on its API server double). The same against Docker, with real
engine restarts and reboots: tests/faults/test_engine_restart.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.core.context import CallContext
from runtime.core.records import SessionStatus
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.fake import FakeProvider
from runtime.providers.kubernetes.provider import KubernetesProvider
from runtime.seams.providers import SandboxProvider, SandboxState
from runtime.seams.stores import Stores
from runtime.services import assemble_sessions
from runtime.sessions.active import ActiveSession, ResetReason
from runtime.sessions.leases import Leases
from runtime.sessions.lifecycle import Lifecycle
from runtime.sessions.manager import SessionManager
from runtime.sessions.reconcile import Reconciler
from runtime.sessions.settings import LifecycleSettings, ReconcileSettings
from runtime.settings import Settings
from runtime.store.sqlite import open_sqlite
from tests.k8s.apiserver import KUBERNETES_NAMESPACE, ApiServerDouble
from tests.runtime.providers.test_contract import kubernetes_provider

CTX = CallContext("org", "user", "c1", base_image="debian-base")
TIERS = LifecycleSettings(
    pause_after_seconds=1000, stop_after_seconds=2000, retire_after_seconds=3000
)


class Rig:
    def __init__(self, root: Path, provider: SandboxProvider) -> None:
        self.provider = provider
        self.store: Stores = open_sqlite(root / "siesta.db")
        catalog = ImageCatalog(
            [CatalogImage(id="debian-base", title="Base", image="siesta/debian-base:1")], root
        )
        settings = Settings(lifecycle=TIERS)
        self.sessions: SessionManager
        self.sessions, leases, _, _ = assemble_sessions(self.store, provider, catalog, settings)
        self.leases: Leases = leases
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
        )

    def use(self) -> ActiveSession:
        with self.sessions.operation(CTX) as active:
            return active

    def write(self, path: str, data: bytes) -> ActiveSession:
        with self.sessions.operation(CTX) as active:
            self.provider.inside.write_file(active.record.sandbox_id, path, [data], 1024)
            return active

    def read(self, path: str) -> tuple[bytes, ActiveSession]:
        data = bytearray()
        with self.sessions.operation(CTX) as active:
            self.provider.inside.read_file(active.record.sandbox_id, path, 1024, data.extend)
            return bytes(data), active

    def status(self) -> SessionStatus:
        record = self.store.sessions.get_session(CTX.org, CTX.conversation)
        assert record is not None
        return record.status

    def counted(self) -> bool:
        """Whether the conversation holds an org capacity slot."""
        return CTX.key in self.store.capacity.slot_members(f"org:{CTX.org}")


@pytest.fixture(params=["fake", pytest.param("kubernetes", marks=pytest.mark.docker)])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    provider: SandboxProvider
    if request.param == "kubernetes":
        provider = kubernetes_provider(request.getfixturevalue("kubernetes_api"))
    else:
        provider = FakeProvider(tmp_path / "sandboxes")
    made = Rig(tmp_path, provider)
    yield made
    made.sessions.close()
    for sandbox in provider.lifecycle.list_sandboxes():
        provider.lifecycle.destroy(sandbox.sandbox_id)
    made.store.close()
    provider.close()


@pytest.fixture
def fake_rig(tmp_path: Path) -> Iterator[Rig]:
    provider = FakeProvider(tmp_path / "sandboxes")
    made = Rig(tmp_path, provider)
    yield made
    made.sessions.close()
    made.store.close()
    provider.close()


def stopper(rig: Rig, request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Stops a sandbox the way the world outside the service does: the engine's
    ``docker stop`` (fake), a node lost with its pod (Kubernetes)."""
    if isinstance(rig.provider, KubernetesProvider):
        api: ApiServerDouble = request.getfixturevalue("kubernetes_api")
        return lambda sandbox_id: api.vanish_pod(KUBERNETES_NAMESPACE, sandbox_id)
    return rig.provider.lifecycle.stop


def test_a_sandbox_stopped_outside_the_service_comes_back_with_its_files(
    rig: Rig, request: pytest.FixtureRequest
) -> None:
    first = rig.write("keep.txt", b"kept")
    stopper(rig, request)(first.record.sandbox_id)

    data, again = rig.read("keep.txt")

    assert data == b"kept"
    assert (again.workspace_reset, again.sandbox_recreated) == (False, False)
    assert again.resumed == "stopped"
    assert again.record.session_id == first.record.session_id
    assert again.record.generation == 1
    assert rig.status() is SessionStatus.ACTIVE and rig.counted()


@pytest.mark.docker
def test_a_failed_pod_of_a_lost_node_is_replaced_on_its_claim(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    api: ApiServerDouble = request.getfixturevalue("kubernetes_api")
    rig = Rig(tmp_path, kubernetes_provider(api))
    try:
        first = rig.write("keep.txt", b"kept")
        api.fail_pod(KUBERNETES_NAMESPACE, first.record.sandbox_id)
        assert rig.provider.lifecycle.inspect(first.record.sandbox_id).state is SandboxState.STOPPED

        data, again = rig.read("keep.txt")

        assert data == b"kept" and again.resumed == "stopped"
        assert again.workspace_reset is False
        assert again.record.session_id == first.record.session_id
    finally:
        rig.sessions.close()
        for sandbox in rig.provider.lifecycle.list_sandboxes():
            rig.provider.lifecycle.destroy(sandbox.sandbox_id)
        rig.store.close()
        rig.provider.close()


def test_a_sandbox_paused_outside_the_service_is_thawed(fake_rig: Rig) -> None:
    first = fake_rig.write("keep.txt", b"kept")
    fake_rig.provider.lifecycle.pause(first.record.sandbox_id)

    data, again = fake_rig.read("keep.txt")

    assert data == b"kept" and again.resumed == "paused"
    assert (
        fake_rig.provider.lifecycle.inspect(first.record.sandbox_id).state is SandboxState.RUNNING
    )


def test_a_removed_sandbox_is_made_again_around_its_workspace(fake_rig: Rig) -> None:
    provider = fake_rig.provider
    assert isinstance(provider, FakeProvider)
    first = fake_rig.write("keep.txt", b"kept")
    provider.lifecycle.remove_sandbox_only(first.record.sandbox_id)
    assert provider.lifecycle.inspect(first.record.sandbox_id).state is SandboxState.MISSING

    data, again = fake_rig.read("keep.txt")
    after = fake_rig.use()

    assert data == b"kept"
    assert again.sandbox_recreated is True and again.workspace_reset is False
    assert again.record.session_id == first.record.session_id
    assert after.sandbox_recreated is False and after.resumed is None


def test_a_sandbox_that_cannot_start_is_made_again_around_its_workspace(fake_rig: Rig) -> None:
    provider = fake_rig.provider
    assert isinstance(provider, FakeProvider)
    first = fake_rig.write("keep.txt", b"kept")
    provider.lifecycle.stop(first.record.sandbox_id)
    provider.lifecycle.broken.add(first.record.sandbox_id)

    data, again = fake_rig.read("keep.txt")

    assert data == b"kept"
    assert again.sandbox_recreated is True and again.workspace_reset is False
    assert again.record.generation == 1


def test_only_a_gone_workspace_starts_afresh_and_says_why(
    rig: Rig, request: pytest.FixtureRequest
) -> None:
    first = rig.write("keep.txt", b"kept")
    rig.provider.lifecycle.destroy(first.record.sandbox_id)

    again = rig.use()

    assert again.workspace_reset is True
    assert again.reset_reason is ResetReason.WORKSPACE_MISSING
    assert again.record.session_id != first.record.session_id
    assert again.record.generation == 2
    assert rig.counted()


def test_reconciliation_notes_a_stopped_sandbox_and_never_takes_it_for_lost(
    rig: Rig, request: pytest.FixtureRequest
) -> None:
    first = rig.write("keep.txt", b"kept")
    stopper(rig, request)(first.record.sandbox_id)

    report = rig.reconciler.run()

    assert report.actions.get("stopped_sandboxes_noted") == [first.record.session_id]
    assert rig.status() is SessionStatus.STOPPED and not rig.counted()
    assert rig.provider.lifecycle.workspace_exists(first.record.sandbox_id)
    data, again = rig.read("keep.txt")
    assert data == b"kept" and again.resumed == "stopped" and rig.counted()


def test_reconciliation_keeps_a_workspace_whose_sandbox_vanished(fake_rig: Rig) -> None:
    provider = fake_rig.provider
    assert isinstance(provider, FakeProvider)
    first = fake_rig.write("keep.txt", b"kept")
    provider.lifecycle.remove_sandbox_only(first.record.sandbox_id)

    report = fake_rig.reconciler.run()

    assert report.actions.get("stopped_sandboxes_noted") == [first.record.session_id]
    assert "sessions_marked_lost" not in report.actions
    data, again = fake_rig.read("keep.txt")
    assert data == b"kept" and again.sandbox_recreated is True


def test_reconciliation_marks_lost_only_what_lost_its_workspace(fake_rig: Rig) -> None:
    first = fake_rig.write("keep.txt", b"kept")
    fake_rig.provider.lifecycle.destroy(first.record.sandbox_id)

    report = fake_rig.reconciler.run()
    again = fake_rig.use()

    assert report.actions.get("sessions_marked_lost") == [first.record.session_id]
    assert again.workspace_reset is True and again.reset_reason is ResetReason.LOST
