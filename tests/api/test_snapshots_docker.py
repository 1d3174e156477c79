"""Snapshots and forks through /v1 on Docker: the workspace and what was installed
outside it survive into a fork and into a conversation started from a snapshot; the
source runs on; later changes on either side stay there; deleting a snapshot removes
its disk clones and breaks nothing started from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from runtime.seams.providers import (
    CONVERSATION_LABEL,
    DEPLOYMENT_LABEL,
    ORG_LABEL,
    SNAPSHOT_LABEL,
)
from tests.helpers import (
    ServiceProcess,
    StartService,
    deployment_of,
    headers,
    new_conversation,
    run_command,
    run_reconcile,
    sandbox_of,
)

pytestmark = [pytest.mark.docker]

INSTALL = (
    "mkdir -p /opt/tool && printf '#!/bin/sh\\necho tool works\\n' > /opt/tool/run"
    " && chmod +x /opt/tool/run && echo workspace-data > notes.txt"
)
CHECK = "/opt/tool/run && cat notes.txt"


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service("docker")


def post(service: ServiceProcess, path: str, body: dict[str, Any], **who: str) -> dict[str, Any]:
    response = service.client.post(path, json=body, headers=headers(**who))
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def snapshot_image(docker_client: docker.DockerClient, snapshot_id: str) -> list[str]:
    images = docker_client.images.list(filters={"label": f"{SNAPSHOT_LABEL}={snapshot_id}"})
    return [str(image.id) for image in images]


def test_files_and_installed_packages_survive_into_forks_and_starts(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    source = new_conversation()
    run_command(service.client, source, INSTALL)
    session = service.client.get(f"/v1/conversations/{source}/sandbox", headers=headers())

    taken = post(service, f"/v1/conversations/{source}/snapshots", {"name": "installed"})
    assert (taken["conversationId"], taken["name"], taken["imageId"]) == (
        source,
        "installed",
        "debian-base",
    )
    assert taken["imageBytes"] > 0  # /opt/tool is in the layer's clone
    assert 0 < taken["workspaceAllocatedBytes"] < taken["workspaceBytes"]  # a sparse copy
    assert taken["copyOnWrite"] is True  # setup's disk folder clones by reference

    fork, started = new_conversation(), new_conversation()
    forked = post(service, f"/v1/conversations/{source}/fork", {"conversationId": fork})
    assert (forked["conversationId"], forked["sourceConversationId"]) == (fork, source)
    post(service, f"/v1/snapshots/{taken['snapshotId']}/conversations", {"conversationId": started})
    for conversation in (fork, started):
        result = run_command(service.client, conversation, CHECK)
        assert result["stdout"] == "tool works\nworkspace-data\n", result

    # Each is its own sandbox from here on; the source ran on as the same session.
    run_command(service.client, source, "echo source > notes.txt && rm /opt/tool/run")
    run_command(service.client, fork, "echo fork > notes.txt")
    assert run_command(service.client, started, CHECK)["stdout"] == "tool works\nworkspace-data\n"
    assert run_command(service.client, fork, "cat notes.txt")["stdout"] == "fork\n"
    assert run_command(service.client, source, "cat notes.txt")["stdout"] == "source\n"
    again = service.client.get(f"/v1/conversations/{source}/sandbox", headers=headers()).json()
    assert (again["sessionId"], again["state"]) == (session.json()["sessionId"], "running")
    sessions = {
        service.client.get(f"/v1/conversations/{c}/sandbox", headers=headers()).json()["sessionId"]
        for c in (source, fork, started)
    }
    assert len(sessions) == 3
    labels = docker_client.containers.get(sandbox_of(service, fork)).labels
    assert (labels[CONVERSATION_LABEL], labels[ORG_LABEL], labels[DEPLOYMENT_LABEL]) == (
        fork,
        "org-a",
        deployment_of(service),
    )

    # Deleting the snapshot leaves what was started from it running on its own copy.
    deleted = service.client.delete(f"/v1/snapshots/{taken['snapshotId']}", headers=headers())
    assert deleted.status_code == 204
    assert run_command(service.client, started, CHECK)["stdout"] == "tool works\nworkspace-data\n"
    missing = service.client.get(f"/v1/snapshots/{taken['snapshotId']}", headers=headers())
    assert missing.status_code == 404


def test_deleting_a_snapshot_removes_its_disk_clones_and_commits_nothing(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    source = new_conversation()
    run_command(service.client, source, INSTALL)
    taken = post(service, f"/v1/conversations/{source}/snapshots", {})
    snapshot_id = taken["snapshotId"]
    copies = (
        Path(service.environment["SIESTA_SANDBOX__DISK_DIR"]) / deployment_of(service) / "snapshots"
    )
    made = sorted(p.name for p in copies.glob(f"{snapshot_id}.*"))
    assert made == [f"{snapshot_id}.img", f"{snapshot_id}.layer.img"]  # workspace, layer
    assert snapshot_image(docker_client, snapshot_id) == []  # no docker commit

    other = service.client.delete(f"/v1/snapshots/{snapshot_id}", headers=headers(org="org-b"))
    assert other.status_code == 404
    deleted = service.client.delete(f"/v1/snapshots/{snapshot_id}", headers=headers())
    assert deleted.status_code == 204
    assert list(copies.glob(f"{snapshot_id}.*")) == []


def test_a_fork_leaves_no_snapshot_behind_and_clean_up_finds_nothing(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    """A fork's snapshot is taken for it alone: its clones become the fork's disks, so
    nothing of it is left (no image, no copy) and deleting the fork leaves nothing."""
    source, fork = new_conversation(), new_conversation()
    copies = (
        Path(service.environment["SIESTA_SANDBOX__DISK_DIR"]) / deployment_of(service) / "snapshots"
    )
    run_command(service.client, source, INSTALL)
    before = set(copies.iterdir()) if copies.is_dir() else set()
    post(service, f"/v1/conversations/{source}/fork", {"conversationId": fork})
    assert set(copies.iterdir()) == before
    image = docker_client.containers.get(sandbox_of(service, fork)).image
    assert image is not None and SNAPSHOT_LABEL not in image.labels  # the base image
    assert run_command(service.client, fork, CHECK)["stdout"] == "tool works\nworkspace-data\n"

    deleted = service.client.delete(f"/v1/conversations/{fork}", headers=headers())
    assert deleted.status_code == 200, deleted.text
    swept = run_reconcile(service, SIESTA_SNAPSHOTS__LEFTOVER_GRACE_SECONDS="0")
    assert "snapshot_leftovers_removed" not in swept["actions"]
    assert run_command(service.client, source, CHECK)["stdout"] == "tool works\nworkspace-data\n"
