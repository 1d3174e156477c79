"""SessionManager rules, on the fake provider and the SQLite store."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.config import SandboxSettings
from runtime.context import CallContext
from runtime.errors import ImageNotInCatalog, ProvisioningTimeout, SandboxDisabled
from runtime.images import CatalogImage, ImageCatalog
from runtime.providers.base import SandboxSpec, SandboxState
from runtime.providers.fake import FakeProvider
from runtime.sessions import SessionManager
from runtime.store.sqlite import SqliteStore


def catalog(tmp_path: Path, *, python_enabled: bool = True) -> ImageCatalog:
    return ImageCatalog(
        [
            CatalogImage(id="debian-base", title="Base", image="siesta/debian-base:1"),
            CatalogImage(id="python", title="Py", image="siesta/python:1", enabled=python_enabled),
        ],
        tmp_path,
    )


class SlowFakeProvider(FakeProvider):
    def __init__(self, root: Path, delay: float) -> None:
        super().__init__(root)
        self.delay = delay

    def create(self, spec: SandboxSpec) -> str:
        time.sleep(self.delay)
        return super().create(spec)


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[FakeProvider]:
    fake = FakeProvider(tmp_path / "sandboxes")
    yield fake
    fake.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    sqlite = SqliteStore(tmp_path / "siesta.db")
    yield sqlite
    sqlite.close()


def manager(
    store: SqliteStore, provider: FakeProvider, images: ImageCatalog, **settings: object
) -> SessionManager:
    return SessionManager(store, provider, images, SandboxSettings.model_validate(settings))


def ctx(image: str | None = "debian-base", conversation: str = "c1") -> CallContext:
    return CallContext("org", "user", conversation, base_image=image)


def test_concurrent_first_operations_provision_one_session(
    tmp_path: Path, store: SqliteStore
) -> None:
    provider = SlowFakeProvider(tmp_path / "slow", delay=0.2)
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
    assert len(provider.list_sandboxes()) == 1
    provider.close()


def test_replacement_keeps_the_pinned_image(
    tmp_path: Path, store: SqliteStore, provider: FakeProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path))
    with sessions.operation(ctx("python")) as first:
        pass
    provider.destroy(first.record.sandbox_id)
    with sessions.operation(ctx("debian-base")) as second:
        pass
    assert second.workspace_reset and second.provisioned
    assert second.record.image_id == "python"
    assert second.record.generation == 2
    assert provider.inspect(first.record.sandbox_id).state is SandboxState.MISSING


def test_replacement_falls_back_to_the_current_selection_when_the_pinned_image_is_withdrawn(
    tmp_path: Path, store: SqliteStore, provider: FakeProvider
) -> None:
    with manager(store, provider, catalog(tmp_path)).operation(ctx("python")) as first:
        pass
    provider.destroy(first.record.sandbox_id)
    withdrawn = manager(store, provider, catalog(tmp_path, python_enabled=False))
    with withdrawn.operation(ctx("debian-base")) as second:
        pass
    assert second.record.image_id == "debian-base"
    # ... and a new conversation cannot pick it.
    with pytest.raises(ImageNotInCatalog), withdrawn.operation(ctx("python", conversation="c2")):
        pass


def test_disabled_sandbox_refuses_before_anything_is_created(
    tmp_path: Path, store: SqliteStore, provider: FakeProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path), enabled=False)
    with pytest.raises(SandboxDisabled), sessions.operation(ctx()):
        pass
    assert provider.list_sandboxes() == [] and store.list_sessions() == []


def test_slow_provisioning_times_out_and_cleans_up_afterwards(
    tmp_path: Path, store: SqliteStore
) -> None:
    provider = SlowFakeProvider(tmp_path / "slow", delay=0.6)
    sessions = manager(store, provider, catalog(tmp_path), provision_timeout_seconds=0.1)
    with pytest.raises(ProvisioningTimeout) as caught, sessions.operation(ctx()):
        pass
    assert caught.value.fields["limit"] == 0.1
    assert "0.1 seconds" in caught.value.message
    assert store.list_sessions() == []
    time.sleep(0.8)
    assert provider.list_sandboxes() == []
    sessions.close()
    provider.close()


def test_delete_removes_sandbox_and_record(
    tmp_path: Path, store: SqliteStore, provider: FakeProvider
) -> None:
    sessions = manager(store, provider, catalog(tmp_path))
    with sessions.operation(ctx()) as active:
        pass
    deleted = sessions.delete(ctx())
    assert deleted is not None and deleted.session_id == active.record.session_id
    assert sessions.delete(ctx()) is None
    assert provider.inspect(active.record.sandbox_id).state is SandboxState.MISSING
    assert store.list_sessions() == []


def test_last_used_is_recorded_at_the_end_of_an_operation(
    tmp_path: Path, store: SqliteStore, provider: FakeProvider
) -> None:
    now = [1000.0]
    sessions = SessionManager(
        store, provider, catalog(tmp_path), SandboxSettings(), clock=lambda: now[0]
    )
    with sessions.operation(ctx()):
        now[0] = 1060.0
    record = store.get_session("org", "c1")
    assert record is not None
    assert (record.created_at, record.last_used_at) == (1000.0, 1060.0)
