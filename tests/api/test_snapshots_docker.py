"""Snapshots and forks through /v1 on Docker: the workspace and what was installed
outside it survive into a fork and into a conversation started from a snapshot; the
source runs on; later changes on either side stay there; deleting a snapshot removes
its image and workspace copy and breaks nothing started from it."""

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
    assert taken["imageBytes"] > 0  # /opt/tool is in the committed layer
    assert 0 < taken["workspaceAllocatedBytes"] < taken["workspaceBytes"]  # a sparse copy

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


def test_deleting_a_snapshot_removes_its_image_and_workspace_copy(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    source = new_conversation()
    run_command(service.client, source, INSTALL)
    taken = post(service, f"/v1/conversations/{source}/snapshots", {})
    snapshot_id = taken["snapshotId"]
    copies = (
        Path(service.environment["SIESTA_SANDBOX__DISK_DIR"]) / deployment_of(service) / "snapshots"
    )
    assert [p.name for p in copies.glob(f"{snapshot_id}.*")] == [f"{snapshot_id}.img"]
    assert len(snapshot_image(docker_client, snapshot_id)) == 1

    other = service.client.delete(f"/v1/snapshots/{snapshot_id}", headers=headers(org="org-b"))
    assert other.status_code == 404
    deleted = service.client.delete(f"/v1/snapshots/{snapshot_id}", headers=headers())
    assert deleted.status_code == 204
    assert list(copies.glob(f"{snapshot_id}.*")) == []
    assert snapshot_image(docker_client, snapshot_id) == []


def test_a_forks_image_outlives_its_snapshot_until_clean_up_finds_it_unused(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    source, fork = new_conversation(), new_conversation()
    run_command(service.client, source, INSTALL)
    post(service, f"/v1/conversations/{source}/fork", {"conversationId": fork})
    image = docker_client.containers.get(sandbox_of(service, fork)).image
    assert image is not None
    snapshot_id = image.labels[SNAPSHOT_LABEL]
    # The fork's snapshot has no record: clean-up may remove it, but the engine keeps
    # an image its container runs on.
    kept = run_reconcile(service, SIESTA_SNAPSHOTS__LEFTOVER_GRACE_SECONDS="0")
    assert "snapshot_leftovers_removed" not in kept["actions"]
    assert run_command(service.client, fork, CHECK)["stdout"] == "tool works\nworkspace-data\n"

    deleted = service.client.delete(f"/v1/conversations/{fork}", headers=headers())
    assert deleted.status_code == 200, deleted.text
    swept = run_reconcile(service, SIESTA_SNAPSHOTS__LEFTOVER_GRACE_SECONDS="0")
    assert snapshot_id in swept["actions"]["snapshot_leftovers_removed"]["ids"]
    assert snapshot_image(docker_client, snapshot_id) == []
