"""Every provider's snapshot seam: what it keeps (the workspace, and on Docker what was
installed outside it), a new sandbox made from it, its deletion; Kubernetes refuses
with ``snapshots_not_supported``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import docker
import pytest

from runtime.core.errors import SnapshotsNotSupported
from runtime.providers.docker.provider import DockerProvider
from runtime.providers.fake import FakeProvider
from runtime.providers.kubernetes.provider import KubernetesProvider
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import SandboxProvider, SandboxSpec
from tests.helpers import TEST_DEPLOYMENT, TEST_DISKS, TEST_RUN_ID, TEST_RUN_LABEL
from tests.runtime.providers.test_contract import provider, run

__all__ = ["provider"]  # the fixture, shared with the provider contract


@pytest.fixture
def source(provider: SandboxProvider) -> Iterator[str]:
    spec = SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {"siesta.test": "snapshots"})
    sandbox_id = provider.lifecycle.create(spec)
    yield sandbox_id
    provider.lifecycle.destroy(sandbox_id)


def test_a_sandbox_made_from_a_snapshot_has_what_it_kept(
    provider: SandboxProvider, source: str
) -> None:
    lifecycle = provider.lifecycle
    snapshot_id = f"snap{uuid.uuid4().hex[:12]}"
    if isinstance(provider, KubernetesProvider):
        with pytest.raises(SnapshotsNotSupported):
            lifecycle.snapshot(source, snapshot_id)
        return
    # The fake runs commands on the host: only its workspace folder is the sandbox's.
    packages = not isinstance(provider, FakeProvider)
    install = " && mkdir -p /opt/t && echo pkg > /opt/t/f" if packages else ""
    check = "cat kept.txt" + (" /opt/t/f" if packages else "")
    kept = "kept\n" + ("pkg\n" if packages else "")
    assert run(provider, source, "echo kept > kept.txt" + install).exit_code == 0

    artifacts = lifecycle.snapshot(source, snapshot_id)
    assert run(provider, source, "echo later > kept.txt").exit_code == 0
    spec = SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {"siesta.test": "snapshots"})
    made = lifecycle.create_from_snapshot(spec, artifacts)
    try:
        assert run(provider, made, check).stdout.text == kept
        # Deleting the snapshot breaks nothing made from it: its disks are clones of
        # the snapshot's, its own.
        assert lifecycle.delete_snapshot(snapshot_id)
        assert run(provider, made, check).stdout.text == kept
        assert run(provider, made, "echo mine > kept.txt && cat kept.txt").stdout.text == "mine\n"
    finally:
        lifecycle.destroy(made)
    assert lifecycle.delete_snapshot(snapshot_id)  # again: nothing left, nothing to do
    assert snapshot_id not in {left.snapshot_id for left in lifecycle.list_snapshot_leftovers()}
    assert run(provider, source, "cat kept.txt").stdout.text == "later\n"


@pytest.mark.docker
def test_without_disks_of_their_own_the_workspace_is_copied_and_the_layer_committed(
    docker_client: docker.DockerClient,
) -> None:
    """``SIESTA_SANDBOX__WORKSPACE_SIZE_MB=0`` and ``__CONTAINER_DISK_MB=0``: the
    workspace is a plain volume, kept as a folder, and the writable layer the engine's,
    committed to an image, which stays while a sandbox runs on it."""
    settings = SandboxSettings(
        extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}, workspace_size_mb=0, container_disk_mb=0
    )
    provider = DockerProvider(settings, deployment_id=TEST_DEPLOYMENT, disks=TEST_DISKS)
    lifecycle = provider.lifecycle
    labels = {"siesta.test": "snapshots"}
    source = lifecycle.create(SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", labels))
    made, snapshot_id = None, f"snap{uuid.uuid4().hex[:12]}"
    try:
        setup = "mkdir -p a/b /opt/t && echo kept > a/b/kept.txt && echo pkg > /opt/t/f"
        assert run(provider, source, setup).exit_code == 0
        artifacts = lifecycle.snapshot(source, snapshot_id)
        assert artifacts.workspace.endswith(".dir") and artifacts.workspace_bytes == 5
        assert not artifacts.layer and artifacts.image.startswith("siesta-snapshot:")
        spec = SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", labels)
        made = lifecycle.create_from_snapshot(spec, artifacts)
        check = "cat a/b/kept.txt /opt/t/f"
        assert run(provider, made, check).stdout.text == "kept\npkg\n"
        assert not lifecycle.delete_snapshot(snapshot_id)  # its image: in use
        assert run(provider, made, check).stdout.text == "kept\npkg\n"
    finally:
        for sandbox in (made, source):
            if sandbox is not None:
                lifecycle.destroy(sandbox)
        lifecycle.delete_snapshot(snapshot_id)
        provider.close()
