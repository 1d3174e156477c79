"""Pausing and resuming a conversation's sandbox on request through /v1, on Docker:
the idle tiers' paused and stopped, taken with the conversation's lease, measured
without being woken, and resumed by the next call as by ``resume``."""

from __future__ import annotations

import threading
import time
from typing import Any

import docker
import pytest

from tests.helpers import ServiceProcess, headers, new_conversation, run_command, sandbox_of

pytestmark = [pytest.mark.docker]


def post(service: ServiceProcess, conversation: str, action: str, **body: Any) -> dict[str, Any]:
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/{action}", json=body or None, headers=headers()
    )
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def metrics(service: ServiceProcess, conversation: str) -> dict[str, Any]:
    response = service.client.get(
        f"/v1/conversations/{conversation}/sandbox/metrics", headers=headers()
    )
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def engine_status(client: docker.DockerClient, service: ServiceProcess, conversation: str) -> str:
    status: str = client.api.inspect_container(sandbox_of(service, conversation))["State"]["Status"]
    return status


def test_a_paused_sandbox_keeps_its_processes_is_measured_asleep_and_resumed(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    started = docker_service.client.post(
        f"/v1/conversations/{conversation}/sandbox/processes",
        json={"command": "sleep 600"},
        headers=headers(),
    )
    assert started.status_code == 201, started.text
    pid = started.json()["pid"]

    assert post(docker_service, conversation, "pause") == {
        "state": "paused",
        "changed": True,
        "resumed": None,
    }
    assert post(docker_service, conversation, "pause")["changed"] is False
    asleep = metrics(docker_service, conversation)
    assert (asleep["state"], asleep["cpuUsedPct"]) == ("paused", 0.0)
    assert asleep["memUsedBytes"] > 0 and asleep["diskTotalBytes"] > 0
    # Measuring woke nothing.
    assert engine_status(docker_client, docker_service, conversation) == "paused"

    assert post(docker_service, conversation, "resume") == {
        "state": "running",
        "changed": True,
        "resumed": "paused",
    }
    assert post(docker_service, conversation, "resume")["changed"] is False
    alive = run_command(docker_service.client, conversation, f"kill -0 {pid} && echo alive")
    assert alive["stdout"] == "alive\n"


def test_a_pause_without_memory_stops_it_and_the_next_call_starts_it_with_its_files(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "echo kept > note.txt")
    stopped = post(docker_service, conversation, "pause", keepMemory=False)
    assert (stopped["state"], stopped["changed"]) == ("stopped", True)
    assert engine_status(docker_client, docker_service, conversation) == "exited"
    measured = metrics(docker_service, conversation)
    assert measured["state"] == "stopped"
    assert (measured["memUsedBytes"], measured["cpuUsedPct"], measured["pids"]) == (None,) * 3
    # A paused request on a stopped sandbox does not wake it.
    assert post(docker_service, conversation, "pause") == {
        "state": "stopped",
        "changed": False,
        "resumed": None,
    }

    # The conversation's next call starts it again, as every call does.
    result = run_command(docker_service.client, conversation, "cat note.txt")
    assert (result["stdout"], result["resumed"]) == ("kept\n", "stopped")


def test_a_pause_waits_for_the_call_in_flight_and_keeps_its_result(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "true")
    idle_pids = metrics(docker_service, conversation)["pids"]
    results: list[dict[str, Any]] = []
    command = threading.Thread(
        target=lambda: results.append(
            run_command(docker_service.client, conversation, "sleep 2; echo finished")
        )
    )
    command.start()
    # Read from outside (no lease), so this sees the command start without waiting for it.
    deadline = time.monotonic() + 15
    while metrics(docker_service, conversation)["pids"] <= idle_pids:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)

    paused = post(docker_service, conversation, "pause")
    command.join(30)
    assert results and results[0]["stdout"] == "finished\n"  # the command was not cut short
    assert paused["state"] == "paused"


def test_a_conversation_without_a_sandbox_is_neither_paused_nor_given_one(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    for action in ("pause", "resume"):
        response = docker_service.client.post(
            f"/v1/conversations/{conversation}/sandbox/{action}", headers=headers()
        )
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "sandbox_not_found"
    described = docker_service.client.get(
        f"/v1/conversations/{conversation}/sandbox", headers=headers()
    )
    assert described.status_code == 404
