"""Ownership: reconciliation and clean-up remove only what this deployment created.

Docker copies an image's labels onto every container made from it, so whatever a
label on an image says, a container someone starts by hand from that image is not
ours. Only the deployment label the service sets at creation counts.
"""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from runtime.images.catalog import ImageCatalog
from runtime.providers.docker.provider import DockerProvider
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import CONVERSATION_LABEL, ORG_LABEL, SandboxSpec
from runtime.store.sqlite import open_sqlite
from tests.helpers import (
    REPO,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    deployment_of,
    new_conversation,
    run_command,
    run_reconcile,
    sandbox_of,
    service_cli_env,
    wait_until,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BASE = "debian:bookworm-slim"
BUILD_MARKER = f"siesta-build-step-{uuid.uuid4().hex[:8]}"


def catalog_images() -> list[str]:
    return [image.image for image in ImageCatalog.load(REPO / "images" / "catalog.yaml").all()]


@pytest.fixture
def service(start_service: StartService) -> ServiceProcess:
    # Passes run only when the test says so, and orphans need no age.
    return start_service(
        "docker",
        SIESTA_RECONCILE__BACKGROUND="false",
        SIESTA_RECONCILE__ORPHAN_GRACE_SECONDS="0",
    )


@pytest.fixture
def hand_started(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    """A container started by hand from the base and from each catalog image, as an
    operator's debugging shell would be: nothing but the image's own labels (plus
    the test run's, for clean-up; the service under test filters by it too)."""
    names = []
    for image in [BASE, *catalog_images()]:
        name = f"not-ours-{uuid.uuid4().hex[:8]}"
        docker_client.containers.run(
            image, ["sleep", "300"], name=name, detach=True, labels={TEST_RUN_LABEL: TEST_RUN_ID}
        )
        names.append(name)
    yield names
    for name in names:
        _remove(docker_client, name)


@pytest.fixture
def other_deployment(docker_client: docker.DockerClient) -> Iterator[str]:
    """A sandbox of another deployment sharing this engine, made by its own provider."""
    provider = DockerProvider(
        SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}),
        deployment_id=f"other-{uuid.uuid4().hex[:8]}",
    )
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {})
    )
    yield sandbox_id
    provider.lifecycle.destroy(sandbox_id)
    provider.close()


class BuildInProgress:
    """A ``docker build`` whose RUN step's container is alive while the test runs (its
    step sleeps far longer than the test needs; ``finish`` ends it)."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self.tag = f"siesta-test/build-step:{TEST_RUN_ID}"
        dockerfile = f"FROM siesta/debian-base:1\nRUN sleep 600 && echo {BUILD_MARKER}\n"
        # The engine's own client, not the SDK's: a build cut short leaves the SDK's
        # stream unread and its socket open.
        self._build = subprocess.Popen(
            ["docker", "build", "--rm", "--force-rm", "--tag", self.tag, "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert self._build.stdin is not None
        self._build.stdin.write(dockerfile.encode())
        self._build.stdin.close()

    def step_container(self) -> str | None:
        for container in self._client.containers.list():
            if BUILD_MARKER in " ".join(container.attrs["Config"].get("Cmd") or []):
                return str(container.name)
        return None

    def finish(self) -> None:
        """Kills the step (the build then fails, as it should) and waits for the build."""
        step = self.step_container()
        if step is not None:
            with contextlib.suppress(docker.errors.APIError):
                self._client.containers.get(step).kill()
        try:
            self._build.wait(120)
        finally:
            self._build.kill()
        with contextlib.suppress(docker.errors.ImageNotFound):
            self._client.images.remove(self.tag, force=True)


def test_reconciliation_and_clean_up_touch_only_what_this_deployment_created(
    service: ServiceProcess,
    docker_client: docker.DockerClient,
    hand_started: list[str],
    other_deployment: str,
    tmp_path: Path,
) -> None:
    build = BuildInProgress(docker_client)
    cleanups: list[Callable[[], None]] = []
    try:
        assert wait_until(lambda: build.step_container() is not None, timeout=60)
        step = build.step_container()
        assert step is not None

        kept, lost = new_conversation(), new_conversation()
        run_command(service.client, kept, "true")
        run_command(service.client, lost, "true")
        lost_sandbox = sandbox_of(service, lost)
        kept_sandbox = sandbox_of(service, kept)
        # A real orphan: created by the service, its record lost (as after a crash
        # between "container created" and "record written").
        _forget_session(service, lost)
        # An image committed from one of our sandboxes carries our deployment label
        # itself; a container started from it inherits the label but is not ours.
        committed = str(docker_client.containers.get(kept_sandbox).commit().id)
        cleanups.append(lambda: docker_client.images.remove(committed, force=True))
        from_commit = f"from-commit-{uuid.uuid4().hex[:8]}"
        docker_client.containers.run(
            committed, name=from_commit, detach=True, labels={TEST_RUN_LABEL: TEST_RUN_ID}
        )
        cleanups.append(lambda: _remove(docker_client, from_commit))
        hand_started.append(from_commit)

        summary = run_reconcile(service)
        removed = summary["actions"].get("orphans_removed", {}).get("ids", [])
        assert summary["deployment"] == deployment_of(service)
        assert removed == [lost_sandbox]  # the container; its volume went with it
        assert _exists(docker_client, kept_sandbox)
        for name in [*hand_started, other_deployment, step]:
            assert _exists(docker_client, name), f"{name} was removed"

        clean = subprocess.run(
            ["make", "-s", "clean-sandboxes", f"VENV={Path(REPO / '.venv')}"],
            cwd=REPO,
            env=service_cli_env(service),
            capture_output=True,
            text=True,
            check=False,
        )
        assert clean.returncode == 0, clean.stderr
        assert not _exists(docker_client, kept_sandbox)
        assert not _volume_exists(docker_client, kept_sandbox)
        for name in [*hand_started, other_deployment, step]:
            assert _exists(docker_client, name), f"{name} was removed by clean-sandboxes"
        # Neither stopped it: the build's step still runs.
        assert build.step_container() == step
    finally:
        build.finish()
        for cleanup in reversed(cleanups):
            cleanup()
    # The conversation whose sandbox clean-up removed starts afresh, and says so.
    assert run_command(service.client, kept, "true")["workspaceReset"] is True


def test_sandboxes_of_earlier_versions_are_used_but_never_taken_as_orphans(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    # A sandbox made before deployment ids: only the old label, no deployment label.
    conversation = new_conversation()
    run_command(service.client, conversation, "echo kept > note")
    sandbox = sandbox_of(service, conversation)
    # Recreate its container as an old version labelled it, on the same volume.
    docker_client.containers.get(sandbox).remove(force=True)
    old_labels = {
        "siesta.managed": "true",
        ORG_LABEL: "org-a",
        CONVERSATION_LABEL: conversation,
        TEST_RUN_LABEL: TEST_RUN_ID,
    }
    docker_client.containers.run(
        "siesta/debian-base:1",
        name=sandbox,
        detach=True,
        labels=old_labels,
        volumes={sandbox: {"bind": "/mnt/work", "mode": "rw"}},
        network_mode="none",
    )
    stray = f"legacy-stray-{uuid.uuid4().hex[:8]}"
    docker_client.containers.run(
        "siesta/debian-base:1", ["sleep", "300"], name=stray, detach=True, labels=old_labels
    )
    try:
        summary = run_reconcile(service)
        assert "orphans_removed" not in summary["actions"]
        assert _exists(docker_client, stray)  # the old label alone proves nothing
        # Its session record names it: it still serves the conversation.
        result = run_command(service.client, conversation, "cat note")
        assert (result["stdout"], result["workspaceReset"]) == ("kept\n", False)
    finally:
        _remove(docker_client, stray)
        _remove(docker_client, sandbox)


def _forget_session(service: ServiceProcess, conversation: str) -> None:
    store = open_sqlite(service.data_dir / "siesta.db")
    try:
        assert store.sessions.delete_session("org-a", conversation, fence=2**62) is not None
    finally:
        store.close()


def _exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.containers.get(name)
    except docker.errors.NotFound:
        return False
    return True


def _volume_exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.volumes.get(name)
    except docker.errors.NotFound:
        return False
    return True


def _remove(client: docker.DockerClient, name: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(name).remove(force=True, v=True)
