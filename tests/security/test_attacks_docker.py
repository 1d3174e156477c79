"""Proof by attack: hostile commands against real sandboxes.

Each case runs an attack in one conversation while a neighbour conversation keeps
working, then asserts three things: the service is healthy, the neighbour was not
affected (it answered during the attack, and its files are intact), and the
attacker's result names the limit it ran into, with the value in force.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    call,
    gvisor_catalog,
    headers,
    new_conversation,
    run_command,
    sandbox_of,
    wait_until,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MEMORY_MB = 128
PIDS = 64
WORKSPACE_MB = 64
NEIGHBOUR_BUDGET_SECONDS = 10.0
"""How long the neighbour's call may take while an attack runs next to it."""


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_SANDBOX__MEMORY_LIMIT_MB=str(MEMORY_MB),
        SIESTA_SANDBOX__PIDS_LIMIT=str(PIDS),
        SIESTA_SANDBOX__WORKSPACE_SIZE_MB=str(WORKSPACE_MB),
    )


@pytest.fixture(scope="module")
def neighbour(service: ServiceProcess) -> str:
    conversation = new_conversation()
    run_command(service.client, conversation, "echo kept > note")
    return conversation


def limits(result: dict[str, Any]) -> dict[str, int]:
    return {limit["limit"]: limit["value"] for limit in result["limitsReached"]}


def attack(
    service: ServiceProcess, neighbour: str, command: str, timeout: int, image: str = "debian-base"
) -> dict[str, Any]:
    """Runs ``command`` in a new conversation while the neighbour works; asserts the
    neighbour and the service were unaffected; returns the attacker's result."""
    attacker = new_conversation()
    run_command(service.client, attacker, "true", image=image)  # provisioned before
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            run_command, service.client, attacker, command, image=image, timeoutSeconds=timeout
        )
        time.sleep(min(2.0, timeout / 2))  # into the attack
        started = time.monotonic()
        during = run_command(service.client, neighbour, "cat note; echo more >> scratch")
        took = time.monotonic() - started
        result = running.result(timeout=timeout + 120)
    assert (during["exitCode"], during["stdout"]) == (0, "kept\n")
    assert took < NEIGHBOUR_BUDGET_SECONDS, f"the neighbour waited {took:.1f} s"
    assert service.client.get("/healthz").status_code == 200
    after = run_command(service.client, attacker, "echo alive")
    assert after["stdout"] == "alive\n"  # the attacker's own sandbox recovers too
    return result


def test_fork_bomb(service: ServiceProcess, neighbour: str) -> None:
    result = attack(service, neighbour, "b() { b | b & }; b", timeout=5)
    assert limits(result) == {"processes": PIDS, "timeout": 5}
    assert "fork" in result["stderr"]


def test_memory_bomb(service: ServiceProcess, neighbour: str) -> None:
    result = attack(service, neighbour, 'x=$(head -c 900000000 /dev/zero | tr "\\0" a)', 60)
    assert result["exitCode"] != 0
    assert limits(result) == {"memory": MEMORY_MB}


def test_many_processes_spinning(service: ServiceProcess, neighbour: str) -> None:
    spin = "for i in $(seq 8); do (while :; do :; done) & done; wait"
    result = attack(service, neighbour, spin, timeout=6)
    assert result["timedOut"] is True
    assert limits(result) == {"timeout": 6}


def test_five_gigabytes_of_stdout(service: ServiceProcess, neighbour: str) -> None:
    result = attack(service, neighbour, "head -c 5G /dev/zero | tr '\\0' x; echo; echo end", 120)
    assert result["exitCode"] == 0
    assert result["truncated"]["stdoutBytes"] == 5 * 1024**3 + 5
    limit = result["truncated"]["limitBytes"]
    # Head and tail kept, with a line saying what was cut between them.
    assert result["stdout"].endswith("x\nend\n") and len(result["stdout"]) <= limit + 256
    assert limits(result) == {"output": result["truncated"]["limitBytes"]}


def test_disk_fill(
    service: ServiceProcess, neighbour: str, docker_client: docker.DockerClient
) -> None:
    host_free = os.statvfs("/var/lib").f_bavail * os.statvfs("/var/lib").f_frsize
    result = attack(service, neighbour, "dd if=/dev/zero of=fill bs=1M count=1000", timeout=60)
    assert "No space left on device" in result["stderr"]
    assert limits(result) == {"workspace_disk": WORKSPACE_MB}
    host_used = host_free - os.statvfs("/var/lib").f_bavail * os.statvfs("/var/lib").f_frsize
    assert host_used < 2 * WORKSPACE_MB * 1024 * 1024  # the host lost at most the workspace


def test_a_million_tiny_files(service: ServiceProcess, neighbour: str) -> None:
    tiny = "for i in $(seq 1000000); do : > f$i || { echo stopped at $i; break; }; done"
    result = attack(service, neighbour, tiny, timeout=120)
    assert "No space left on device" in result["stderr"]
    assert "stopped at" in result["stdout"]
    assert limits(result) == {"workspace_disk": WORKSPACE_MB}


def test_a_command_ignoring_sigterm(service: ServiceProcess, neighbour: str) -> None:
    result = attack(service, neighbour, "trap '' TERM; sleep 1000", timeout=3)
    assert (result["exitCode"], result["timedOut"]) == (137, True)  # SIGKILL after the grace
    assert limits(result) == {"timeout": 3}


@pytest.fixture(scope="module")
def idle_service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    """Suspends quickly: escaped processes are frozen after 3 idle seconds and ended
    after 8."""
    return start_service(
        "docker",
        SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS="3",
        SIESTA_LIFECYCLE__STOP_AFTER_SECONDS="8",
        SIESTA_RECONCILE__INTERVAL_SECONDS="1",
    )


def test_an_escaped_process_lives_only_while_the_conversation_is_active(
    idle_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    escape = (
        "setsid nohup sh -c 'while :; do date +%s >> /mnt/work/beat; sleep 0.2; done' "
        ">/dev/null 2>&1 & echo started"
    )
    assert run_command(idle_service.client, conversation, escape)["stdout"] == "started\n"
    container = sandbox_of(idle_service, conversation)

    def state() -> str:
        return str(docker_client.api.inspect_container(container)["State"]["Status"])

    # It outlives its command while the conversation is active ...
    time.sleep(1)
    assert state() == "running"
    # ... is frozen when the sandbox is paused for idleness, and ended when it is stopped.
    assert wait_until(lambda: state() == "paused", timeout=20)
    assert wait_until(lambda: state() == "exited", timeout=30)
    # ([w]: the pattern must not match this command's own line.)
    alive = "ps -eo args | grep -c '[w]hile :; do date' || true"
    result = run_command(idle_service.client, conversation, alive)
    assert result["stdout"] == "0\n"
    assert result["workspaceReset"] is False  # the disk is kept: only processes ended


@pytest.fixture
def swapping(service: ServiceProcess) -> Iterator[str]:
    """A conversation whose ``link`` flips between a workspace file and /etc/shadow,
    and whose ``dir`` between a workspace folder and /etc, as fast as it can."""
    conversation = new_conversation()
    run_command(
        service.client,
        conversation,
        "echo inside > ok.txt; mkdir -p real; "
        "(setsid sh -c 'while :; do ln -sfn /etc/shadow link; ln -sfn ok.txt link; "
        "ln -sfn /etc dir; ln -sfn real dir; done' >/dev/null 2>&1 &)",
    )
    yield conversation
    run_command(service.client, conversation, "pkill -f 'ln -sfn' || true")


def test_symlink_swaps_between_check_and_use_never_escape(
    service: ServiceProcess, swapping: str
) -> None:
    outcomes: set[str] = set()
    for attempt in range(150):
        read = service.client.post(
            f"/v1/conversations/{swapping}/sandbox/readFile",
            json={"path": "link"},
            headers=headers(),
        )
        body = read.json()
        if read.status_code == 200:
            assert body["content"] == "inside\n", body  # never the shadow file
            outcomes.add("read")
        else:
            assert body["error"]["code"] in ("path_outside_workspace", "file_not_found"), body
            outcomes.add(body["error"]["code"])
        written = service.client.post(
            f"/v1/conversations/{swapping}/sandbox/writeFile",
            json={"path": f"dir/planted-{attempt}", "content": "x"},
            headers=headers(),
        )
        outcomes.add(f"write {written.status_code}")
    result = call(service.client, swapping, "runCommand", {"command": "ls /etc | grep -c planted"})
    assert result["stdout"] == "0\n"  # nothing ever landed in /etc
    assert "read" in outcomes  # the swap really raced both ways


@pytest.fixture(scope="module")
def gvisor_attacked(
    start_service: StartService,
    docker_client: docker.DockerClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> ServiceProcess:
    """Every sandbox under gVisor. Its kernel (the Sentry) runs inside the sandbox's
    own cgroup, so it needs more processes and memory than a runc sandbox."""
    catalog = gvisor_catalog(tmp_path_factory.mktemp("gvisor-attacks"))
    return start_service(
        "docker",
        SIESTA_IMAGES__CATALOG_PATH=str(catalog),
        SIESTA_SANDBOX__MEMORY_LIMIT_MB="256",
        SIESTA_SANDBOX__WORKSPACE_SIZE_MB=str(WORKSPACE_MB),
    )


@pytest.mark.parametrize(
    ("hostile", "timeout"),
    [
        ("b() { b | b & }; b", 10),
        ('x=$(head -c 900000000 /dev/zero | tr "\\0" a)', 60),
        ("for i in $(seq 8); do (while :; do :; done) & done; wait", 6),
        ("dd if=/dev/zero of=fill bs=1M count=1000", 60),
    ],
    ids=["fork-bomb", "memory-bomb", "spinning", "disk-fill"],
)
def test_under_gvisor_an_attack_costs_only_the_attackers_sandbox(
    gvisor_attacked: ServiceProcess, hostile: str, timeout: int
) -> None:
    """Under gVisor a process or memory bomb takes the attacker's whole sandbox down
    (its kernel shares the cgroup), so the call may end ``sandbox_unavailable`` —
    "try again" — instead of naming the limit; the engine restarts the sandbox with
    its disk, and no other sandbox notices."""
    client = gvisor_attacked.client
    attacker, neighbour = new_conversation(), new_conversation()
    run_command(client, attacker, "echo kept > note")
    run_command(client, neighbour, "echo kept > note")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            client.post,
            f"/v1/conversations/{attacker}/sandbox/runCommand",
            json={"command": hostile, "timeoutSeconds": timeout},
            headers=headers(),
        )
        time.sleep(2)
        started = time.monotonic()
        during = run_command(client, neighbour, "cat note")
        took = time.monotonic() - started
        response = running.result(timeout=timeout + 120)
    assert during["stdout"] == "kept\n" and took < NEIGHBOUR_BUDGET_SECONDS, took
    assert gvisor_attacked.client.get("/healthz").status_code == 200
    if response.status_code == 200:
        assert response.json()["exitCode"] != 0 or response.json()["limitsReached"]
    else:
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "sandbox_unavailable"
    # The next call (after a "try again" or two while the engine restarts it) works,
    # and the attacker's workspace is still its own.
    assert wait_until(lambda: _answers(gvisor_attacked, attacker), timeout=60)


def _answers(service: ServiceProcess, conversation: str) -> bool:
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": "cat note"},
        headers=headers(),
    )
    return response.status_code == 200 and response.json()["stdout"] == "kept\n"
