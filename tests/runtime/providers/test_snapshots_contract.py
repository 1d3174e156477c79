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
        # Its image stays while a sandbox runs on it (Docker); the copy goes.
        removed = lifecycle.delete_snapshot(snapshot_id)
        assert removed is not packages
        assert run(provider, made, check).stdout.text == kept
    finally:
        lifecycle.destroy(made)
    assert lifecycle.delete_snapshot(snapshot_id)
    assert snapshot_id not in {left.snapshot_id for left in lifecycle.list_snapshot_leftovers()}
    assert run(provider, source, "cat kept.txt").stdout.text == "later\n"


@pytest.mark.docker
def test_a_workspace_without_a_disk_of_its_own_is_kept_as_a_folder(
    docker_client: docker.DockerClient,
) -> None:
    """``SIESTA_SANDBOX__WORKSPACE_SIZE_MB=0``: the workspace is a plain volume."""
    settings = SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}, workspace_size_mb=0)
    provider = DockerProvider(settings, deployment_id=TEST_DEPLOYMENT, disks=TEST_DISKS)
    lifecycle = provider.lifecycle
    labels = {"siesta.test": "snapshots"}
    source = lifecycle.create(SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", labels))
    made, snapshot_id = None, f"snap{uuid.uuid4().hex[:12]}"
    try:
        assert run(provider, source, "mkdir -p a/b && echo kept > a/b/kept.txt").exit_code == 0
        artifacts = lifecycle.snapshot(source, snapshot_id)
        assert artifacts.workspace.endswith(".dir") and artifacts.workspace_bytes == 5
        spec = SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", labels)
        made = lifecycle.create_from_snapshot(spec, artifacts)
        assert run(provider, made, "cat a/b/kept.txt").stdout.text == "kept\n"
    finally:
        for sandbox in (made, source):
            if sandbox is not None:
                lifecycle.destroy(sandbox)
        lifecycle.delete_snapshot(snapshot_id)
        provider.close()
