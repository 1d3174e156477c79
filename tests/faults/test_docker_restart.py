"""The Docker daemon restarted while sessions are idle.

Restarting the engine stops every container (no live-restore here), so this
test runs last (see ``pytest_collection_modifyitems`` in conftest.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import docker
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.docker_restart]

DOCKERD_LOG = Path("/var/log/siesta-dockerd.log")


def dockerd_pids() -> list[int]:
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "dockerd":
                pids.append(int(comm.parent.name))
        except OSError:
            continue  # the process ended while we looked
    return pids


def restart_docker_daemon() -> None:
    """As scripts/setup.sh starts it: systemd when there is one, else dockerd in the background."""
    if Path("/run/systemd/system").is_dir() and shutil.which("systemctl"):
        subprocess.run(["systemctl", "restart", "docker"], check=True)
    else:
        for pid in dockerd_pids():
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while dockerd_pids():
            assert time.monotonic() < deadline, "dockerd did not stop"
            time.sleep(0.2)
        # Detached through a shell, exactly as setup.sh does: it outlives this test.
        subprocess.run(["sh", "-c", f"nohup dockerd >>'{DOCKERD_LOG}' 2>&1 &"], check=True)
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "dockerd did not come back"
        time.sleep(0.2)


def test_sessions_are_replaced_with_a_reset_after_a_daemon_restart(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    service: ServiceProcess = start_service("docker")
    conversations = [new_conversation() for _ in range(3)]
    for conversation in conversations:
        run_command(service.client, conversation, "echo before > f.txt")

    restart_docker_daemon()

    for conversation in conversations:
        outcomes = []
        for _ in range(5):  # the service's pooled engine connections may be stale once
            response = service.client.post(
                f"/v1/conversations/{conversation}/sandbox/runCommand",
                json={"command": "cat f.txt || echo gone"},
                headers=headers(),
            )
            outcomes.append(response)
            if response.status_code == 200:
                break
        final = outcomes[-1]
        assert final.status_code == 200, final.text
        assert all(r.json()["error"]["code"] == "provider_unavailable" for r in outcomes[:-1])
        body = final.json()
        # The containers were stopped by the restart: a replacement, and the agent told so.
        assert body["workspaceReset"] is True
        assert body["stdout"] == "gone\n"
