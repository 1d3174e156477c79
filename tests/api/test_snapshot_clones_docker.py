"""Snapshots and forks made of disk clones (the disk folder clones by reference: XFS
with reflink, as ``scripts/setup.sh`` makes it), on Docker through ``/v1``.

A fork taken while its source writes on, to its workspace and outside it, gets one
instant of both, each file whole, and from then on neither side sees the other's
writes; several forks in one call all get the same instant; a fork's disks keep their
sizes (the limits hold with clones). The disk a fork takes at once is
``bench/forks.py``'s to measure (the file system is shared with whatever else runs).
"""

from __future__ import annotations

import time

import docker
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
)

pytestmark = [pytest.mark.docker]

WORKSPACE_MB, LAYER_MB = 64, 96
WRITER = (
    "nohup sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); "
    "echo $i > /mnt/work/count.tmp && mv /mnt/work/count.tmp /mnt/work/count; "
    "echo $i > /opt/count.tmp && mv /opt/count.tmp /opt/count; done' >/dev/null 2>&1 &"
)
"""Counts as fast as it can, in the workspace and in the writable layer: each file
replaced whole (rename), so a consistent instant shows two whole numbers."""


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_SANDBOX__WORKSPACE_SIZE_MB=str(WORKSPACE_MB),
        SIESTA_SANDBOX__CONTAINER_DISK_MB=str(LAYER_MB),
    )


def fork(service: ServiceProcess, source: str) -> str:
    made = new_conversation()
    answer = service.client.post(
        f"/v1/conversations/{source}/fork", json={"conversationId": made}, headers=headers()
    )
    assert answer.status_code == 201, answer.text
    return made


def counts(service: ServiceProcess, conversation: str) -> tuple[int, int]:
    out = run_command(service.client, conversation, "cat /mnt/work/count /opt/count")["stdout"]
    workspace, layer = out.split()
    return int(workspace), int(layer)


def test_a_fork_taken_while_its_source_writes_is_one_whole_instant_then_its_own(
    service: ServiceProcess,
) -> None:
    source = new_conversation()
    run_command(service.client, source, WRITER)
    time.sleep(0.5)
    forks = [fork(service, source) for _ in range(2)]
    for made in forks:
        workspace, layer = counts(service, made)
        # The writer is a process: it did not come along (no memory is kept), so the
        # fork's files stay where the instant left them.
        assert abs(workspace - layer) <= 1, (workspace, layer)
        assert counts(service, made) == (workspace, layer)
    source_now = counts(service, source)
    time.sleep(0.3)
    assert counts(service, source) != source_now  # the source ran on, unfrozen
    run_command(service.client, forks[0], "echo mine > /mnt/work/count && echo mine > /opt/x")
    seen = run_command(service.client, source, "cat /mnt/work/count; ls /opt/x 2>&1")["stdout"]
    assert "mine" not in seen and "No such file" in seen
    second = run_command(service.client, forks[1], "cat /mnt/work/count; ls /opt/x 2>&1")
    assert "mine" not in second["stdout"] and "No such file" in second["stdout"]


def test_a_forks_disks_keep_their_sizes(service: ServiceProcess) -> None:
    source = new_conversation()
    run_command(service.client, source, "head -c 10M /dev/urandom > data.bin")
    made = fork(service, source)
    over_workspace = run_command(
        service.client, made, f"head -c {WORKSPACE_MB + 8}M /dev/zero > big.bin; echo $?"
    )
    assert "No space left on device" in over_workspace["stderr"], over_workspace
    over_layer = run_command(
        service.client, made, f"head -c {LAYER_MB + 8}M /dev/zero > /opt/big.bin; echo $?"
    )
    assert "No space left on device" in over_layer["stderr"], over_layer
    after = run_command(service.client, made, "rm big.bin /opt/big.bin; stat -c %s data.bin")
    assert after["stdout"] == f"{10 * 2**20}\n"  # the source's data, whole
    assert run_command(service.client, source, "ls big.bin 2>&1; echo ok")["stdout"].endswith(
        "ok\n"
    )


def test_forks_in_one_call_share_one_instant_and_then_go_their_own_ways(
    service: ServiceProcess,
) -> None:
    source = new_conversation()
    run_command(service.client, source, WRITER)
    time.sleep(0.5)
    made = [new_conversation() for _ in range(4)]
    answer = service.client.post(
        f"/v1/conversations/{source}/forks", json={"conversationIds": made}, headers=headers()
    )
    assert answer.status_code == 201, answer.text
    assert [f["error"] for f in answer.json()["forks"]] == [None] * len(made)
    # One freeze for all: every fork holds the very same instant of the source.
    instants = {counts(service, conversation) for conversation in made}
    assert len(instants) == 1, instants
    workspace, layer = instants.pop()
    assert abs(workspace - layer) <= 1, (workspace, layer)
    for index, conversation in enumerate(made):
        run_command(service.client, conversation, f"echo {index} > /opt/mine")
    for index, conversation in enumerate(made):
        assert run_command(service.client, conversation, "cat /opt/mine")["stdout"] == f"{index}\n"
    assert "No such file" in run_command(service.client, source, "cat /opt/mine 2>&1")["stdout"]
