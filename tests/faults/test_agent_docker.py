"""The sandbox agent against what commands do, and against its own death.

The agent is PID 1 of the sandbox: commands that exhaust memory, fork until the
pids limit, close every descriptor or kill everything they can see leave it
answering, and the next call works. Killed from outside (kill -9 of the
container's init from the host), the one call in flight is told
``sandbox_unavailable`` at once, the engine starts the container again with its
disk, and the next call works with the files still there.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import docker
import docker.errors
import httpx
import pytest

from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    call,
    headers,
    new_conversation,
    run_command,
    sandbox_of,
    wait_until,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MEMORY_MB = 256
PIDS = 64


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_SANDBOX__MEMORY_LIMIT_MB=str(MEMORY_MB),
        SIESTA_SANDBOX__PIDS_LIMIT=str(PIDS),
    )


def assert_agent_answers(service: ServiceProcess, conversation: str) -> None:
    result = run_command(service.client, conversation, "cat /proc/1/comm; echo fine")
    assert result["stdout"] == "siesta-agent\nfine\n"
    assert result["workspaceReset"] is False


@pytest.mark.parametrize(
    ("hostile", "timeout"),
    [
        # Eats memory past the sandbox's limit: the kernel kills the biggest process.
        ('x=$(head -c 900000000 /dev/zero | tr "\\0" a); echo "${#x}"', 60),
        # Forks until the pids limit; the timeout ends the whole group.
        ("b() { b | b & }; b", 3),
        # Closes every descriptor it has, then lingers.
        ("exec 0<&- 1>&- 2>&-; sleep 1", 30),
        # Kills every process it can see (PID 1 cannot be killed from inside).
        ("sleep 1000 & kill -9 -1; echo still here", 30),
        # A process that ignores SIGTERM: the grace ends with SIGKILL.
        ("trap '' TERM; sleep 1000", 2),
    ],
    ids=["memory", "fork-bomb", "closed-descriptors", "kill-everything", "ignores-term"],
)
def test_hostile_commands_leave_the_agent_answering(
    service: ServiceProcess, hostile: str, timeout: int
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "echo kept > note")
    run_command(service.client, conversation, hostile, timeoutSeconds=timeout)
    assert_agent_answers(service, conversation)
    assert run_command(service.client, conversation, "cat note")["stdout"] == "kept\n"


def test_a_killed_agent_is_noticed_at_once_and_the_next_call_works(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "echo kept > note")
    container = docker_client.containers.get(sandbox_of(service, conversation))
    outcome: list[httpx.Response] = []
    caller = threading.Thread(
        target=lambda: outcome.append(
            service.client.post(
                f"/v1/conversations/{conversation}/sandbox/runCommand",
                json={"command": "touch started; sleep 1000", "timeoutSeconds": 600},
                headers=headers(),
            )
        )
    )
    caller.start()
    assert wait_until(lambda: _has_file(container, "started"), timeout=30)
    agent_pid = _pid(docker_client, str(container.id))
    os.kill(agent_pid, signal.SIGKILL)  # from the host: the one way to kill an init
    caller.join(30)
    assert not caller.is_alive()
    response = outcome[0]
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "sandbox_unavailable"
    assert "try again" in response.json()["error"]["message"]
    # The engine starts the container again; the disk is as it was.
    result = call(service.client, conversation, "readFile", {"path": "note"})
    assert result["content"] == "kept\n" and result["workspaceReset"] is False
    assert_agent_answers(service, conversation)


def _has_file(container: Any, name: str) -> bool:
    return bool(container.exec_run(["test", "-e", f"/mnt/work/{name}"]).exit_code == 0)


def _pid(client: docker.DockerClient, container_id: str) -> int:
    return int(client.api.inspect_container(container_id)["State"]["Pid"])


def test_the_image_runs_a_given_command_like_any_image(docker_client: docker.DockerClient) -> None:
    # `docker run IMAGE CMD`: the agent is then only an init for CMD (as tini was).
    output = docker_client.containers.run(
        "siesta/debian-base:1",
        ["sh", "-c", "cat /proc/1/comm; echo hello"],
        remove=True,
        network_mode="none",
        labels={TEST_RUN_LABEL: TEST_RUN_ID},
    )
    assert output.decode().split() == ["siesta-agent", "hello"]
    with pytest.raises(docker.errors.ContainerError) as failed:
        docker_client.containers.run(
            "siesta/debian-base:1",
            ["sh", "-c", "exit 7"],
            remove=True,
            network_mode="none",
            labels={TEST_RUN_LABEL: TEST_RUN_ID},
        )
    assert failed.value.exit_status == 7
