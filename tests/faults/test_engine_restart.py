"""Engine restarts and reboots are ordinary: every conversation finds its files after them,
and a snapshot (of a conversation deleted since) still starts new ones.

On an engine of the module's own (``engine.py``): stopping, killing and "rebooting"
it touches nothing else on the machine, so this module runs in any order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from runtime.seams.providers import POOL_LABEL
from tests.faults.engine import PrivateEngine
from tests.helpers import (
    REPO,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    container_states,
    headers,
    new_conversation,
    respawn,
    run_command,
    run_reconcile,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

IMAGE = "siesta/debian-base:1"
# Files in the workspace, and a "package" outside it (in the writable layer).
MAKE_STATE = "echo kept > keep.txt && mkdir -p /opt/pkg && echo installed > /opt/pkg/bin"
READ_STATE = "cat keep.txt /opt/pkg/bin"


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient) -> Iterator[PrivateEngine]:
    private = PrivateEngine([IMAGE])
    try:
        private.start()
        private.load_images(docker_client)
        yield private
    finally:
        private.remove(f"{TEST_RUN_LABEL}={TEST_RUN_ID}")


@pytest.fixture(scope="module")
def on_engine(
    engine: PrivateEngine, start_service: StartService
) -> Iterator[Callable[..., ServiceProcess]]:
    """Starts services whose sandboxes live on the private engine; stops them before
    the engine goes (a service left running would go on making sandboxes)."""
    started: list[ServiceProcess] = []

    def start(folder: Path, **env: str) -> ServiceProcess:
        catalog = yaml.safe_load((REPO / "images" / "catalog.yaml").read_text())
        catalog["images"] = [i for i in catalog["images"] if i["image"] == IMAGE]
        (folder / "catalog.yaml").write_text(yaml.safe_dump(catalog))
        service = start_service(
            "docker",
            SIESTA_PROVIDER__BASE_URL=engine.url,
            SIESTA_SANDBOX__DISK_DIR=str(engine.disk_dir),
            SIESTA_IMAGES__CATALOG_PATH=str(folder / "catalog.yaml"),
            SIESTA_RECONCILE__BACKGROUND="false",
            SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS="1",
            SIESTA_LIFECYCLE__STOP_AFTER_SECONDS="100000",
            SIESTA_LIFECYCLE__RETIRE_AFTER_SECONDS="200000",
            SIESTA_RECONCILE__ORPHAN_GRACE_SECONDS="100000",
            **env,
        )
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def first_call(service: ServiceProcess, conversation: str, command: str) -> dict[str, Any]:
    """The conversation's next operation, which must succeed at once."""
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": command},
        headers=headers(),
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def pool_members(engine: PrivateEngine) -> list[str]:
    client = engine.client()
    try:
        members = container_states(client, [POOL_LABEL])
        return [name for name, state in members.items() if state == "paused"]
    finally:
        client.close()


def wait_for(predicate: Any, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_after_an_engine_restart_every_conversation_finds_its_files(
    on_engine: Callable[..., ServiceProcess], engine: PrivateEngine, tmp_path: Path, how: str
) -> None:
    service = on_engine(
        tmp_path,
        SIESTA_POOL__ENABLED="true",
        SIESTA_POOL__MIN_PER_IMAGE="1",
        SIESTA_POOL__MAX_PER_IMAGE="1",
        SIESTA_POOL__MAX_TOTAL="1",
        SIESTA_POOL__REFILL_INTERVAL_SECONDS="0.2",
    )
    paused, active = new_conversation(), new_conversation()
    run_command(service.client, paused, MAKE_STATE)
    time.sleep(1.2)
    tiers = run_reconcile(service)  # the first conversation goes idle: paused
    run_command(service.client, active, MAKE_STATE)
    wait_for(lambda: len(pool_members(engine)) == 1)
    assert tiers["actions"]["idle_sessions_paused"]["count"] == 1
    source = new_conversation()  # snapshot, then deleted: the snapshot must outlive both
    run_command(service.client, source, MAKE_STATE)
    snapshot = service.client.post(
        f"/v1/conversations/{source}/snapshots", json={}, headers=headers()
    )
    assert snapshot.status_code == 201, snapshot.text
    gone = service.client.delete(f"/v1/conversations/{source}", headers=headers())
    assert gone.status_code == 200, gone.text

    engine.restart(kill=how == "killed")

    # Reconciliation after the restart: stopped sandboxes are not lost ones.
    report = run_reconcile(service)
    assert not {"sessions_marked_lost", "idle_sessions_retired"} & set(report["actions"])
    for conversation in (paused, active):
        result = first_call(service, conversation, READ_STATE)
        assert result["stdout"] == "kept\ninstalled\n", result
        assert (result["workspaceReset"], result["sandboxRecreated"]) == (False, False)
    # The snapshot outlived its source and the restart: a conversation starts from it.
    restored = new_conversation()
    started = service.client.post(
        f"/v1/snapshots/{snapshot.json()['snapshotId']}/conversations",
        json={"conversationId": restored},
        headers=headers(),
    )
    assert started.status_code == 201, started.text
    assert first_call(service, restored, READ_STATE)["stdout"] == "kept\ninstalled\n"
    # Pool members that did not survive are discarded; a new conversation is served.
    fresh = first_call(service, new_conversation(), "echo new")
    assert fresh["stdout"] == "new\n" and fresh["workspaceReset"] is False


def test_after_a_reboot_every_conversation_finds_its_files_and_packages(
    on_engine: Callable[..., ServiceProcess], engine: PrivateEngine, tmp_path: Path
) -> None:
    service = on_engine(tmp_path)
    conversations = [new_conversation() for _ in range(2)]
    for conversation in conversations:
        run_command(service.client, conversation, MAKE_STATE)

    service.kill()  # the host goes down, and the service with it
    engine.reboot()
    service = respawn(service)

    try:
        for conversation in conversations:
            result = first_call(service, conversation, READ_STATE)
            assert result["stdout"] == "kept\ninstalled\n", result
            assert result["workspaceReset"] is False and result["resumed"] == "stopped"
            assert result["sandboxRecreated"] is False
    finally:
        service.stop()
