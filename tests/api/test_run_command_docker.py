"""runCommand end to end: real HTTP, a real service process, real Docker (and, for
what does not look at containers, Kubernetes on the API server double)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from docker.models.containers import Container

from runtime.seams.providers import CONVERSATION_LABEL, ORG_LABEL
from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
    run_resources,
)

pytestmark = pytest.mark.docker


def test_readme_example_files_persist_within_a_conversation_only(
    sandbox_service: ServiceProcess,
) -> None:
    client = sandbox_service.client
    first, second = new_conversation(), new_conversation()

    written = run_command(client, first, "echo hello > a.txt && cat a.txt")
    again = run_command(client, first, "cat a.txt")
    elsewhere = run_command(client, second, "cat a.txt")

    assert (written["exitCode"], written["stdout"]) == (0, "hello\n")
    assert (again["exitCode"], again["stdout"]) == (0, "hello\n")
    assert elsewhere["exitCode"] == 1
    assert "No such file" in elsewhere["stderr"]


def test_first_operation_provisions_lazily_and_later_ones_reuse(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation}) == ([], [])
    assert (
        client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers()).status_code
        == 404
    )

    first = run_command(client, conversation, "echo $$ > /tmp/pid; pwd; echo $0")
    containers, volumes = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    second = run_command(client, conversation, "cat /tmp/pid; pwd")

    assert first["stdout"].splitlines() == ["/mnt/work", "bash"]
    assert len(containers) == 1
    assert volumes == containers  # the workspace volume is named like its container
    assert second["sessionId"] == first["sessionId"]
    assert second["stdout"].splitlines()[1] == "/mnt/work"
    assert first["workspaceReset"] is second["workspaceReset"] is False
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation})[0] == containers


def test_each_call_is_a_fresh_login_shell(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    run_command(client, conversation, "export FOO=bar; cd /tmp; mkdir -p sub")
    result = run_command(
        client, conversation, 'echo "${FOO:-unset}"; pwd; shopt -q login_shell && echo login'
    )
    assert result["stdout"].splitlines() == ["unset", "/mnt/work", "login"]


def test_session_keeps_its_image_when_the_agent_changes_it(
    sandbox_service: ServiceProcess,
) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    first = run_command(
        client, conversation, "command -v python3 || echo none", image="debian-base"
    )
    later = run_command(client, conversation, "command -v python3 || echo none", image="python")
    fresh = run_command(client, new_conversation(), "command -v python3", image="python")
    state = client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers()).json()

    assert first["stdout"] == later["stdout"] == "none\n"
    assert later["sessionId"] == first["sessionId"]
    assert state["imageId"] == "debian-base"
    assert fresh["stdout"] == "/usr/bin/python3\n"


def test_a_removed_container_is_made_again_around_its_workspace(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    first = run_command(client, conversation, "echo keep > note.txt && touch /opt/installed")
    (container,), _ = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    docker_client.containers.get(container).remove(force=True)

    recreated = run_command(client, conversation, "cat note.txt; ls /opt/installed")
    after = run_command(client, conversation, "true")

    assert recreated["sandboxRecreated"] is True and recreated["workspaceReset"] is False
    assert recreated["sessionId"] == first["sessionId"]
    assert recreated["stdout"] == "keep\n"  # the workspace is the same
    assert "No such file" in recreated["stderr"]  # what was outside it is not
    assert after["sandboxRecreated"] is False and after["resumed"] is None
    containers, volumes = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    assert containers == volumes == [f"siesta-{first['sessionId']}"]
    state = client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers()).json()
    assert state["generation"] == 1


def stopped_sandbox(
    client: httpx.Client, docker_client: docker.DockerClient
) -> tuple[str, dict[str, Any], Container]:
    """A new conversation with a file in its workspace and one outside it, its sandbox's
    container stopped: (conversation, first call's answer, container)."""
    conversation = new_conversation()
    first = run_command(client, conversation, "echo keep > note.txt && touch /opt/installed")
    (name,), _ = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    container = docker_client.containers.get(name)
    container.stop(timeout=1)
    return conversation, first, container


def assert_made_again_around_its_workspace(
    client: httpx.Client, conversation: str, first: dict[str, Any]
) -> None:
    again = run_command(client, conversation, "cat note.txt; ls /opt/installed")
    assert again["sandboxRecreated"] is True and again["workspaceReset"] is False
    assert again["sessionId"] == first["sessionId"]
    assert again["stdout"] == "keep\n"  # the workspace is the same
    assert "No such file" in again["stderr"]  # what was outside it is not


def test_a_container_that_cannot_start_any_more_is_made_again_around_its_workspace(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation, first, container = stopped_sandbox(client, docker_client)
    # Its writable layer broken (a disk fault, a half-done engine upgrade): the engine
    # cannot mount its root file system, so it can never start again.
    container.reload()
    shutil.rmtree(container.attrs["GraphDriver"]["Data"]["UpperDir"])

    assert_made_again_around_its_workspace(client, conversation, first)
    assert docker_client.containers.get(str(container.name)).id != container.id


def test_a_container_the_engine_failed_to_remove_is_made_again_around_its_workspace(
    docker_service: ServiceProcess, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    client = docker_service.client
    conversation, first, container = stopped_sandbox(client, docker_client)
    # A removal that fails half way leaves the container dead: the engine refuses to
    # start it again ("marked for removal"), however often it is asked. In the wild an
    # engine stopped during the removal; here a file the engine cannot unlink, put in
    # the layer's own folder (under the service's mount of it, seen through a plain
    # bind of the engine's folder).
    container.reload()
    layer = Path(container.attrs["GraphDriver"]["Data"]["UpperDir"]).parent
    seen = tmp_path / "engine"
    seen.mkdir()
    subprocess.run(["mount", "--bind", layer.parent, seen], check=True)
    stuck = seen / layer.name / "stuck"
    try:
        stuck.touch()
        subprocess.run(["chattr", "+i", stuck], check=True)
        with pytest.raises(docker.errors.APIError, match="failed to remove root filesystem"):
            container.remove()
    finally:
        subprocess.run(["chattr", "-i", stuck], check=False)
        subprocess.run(["umount", seen], check=True)
    container.reload()
    assert container.status == "dead"

    assert_made_again_around_its_workspace(client, conversation, first)
    assert docker_client.containers.get(str(container.name)).status == "running"
    assert not layer.exists()  # the dead container's layer went with it


def test_a_removed_workspace_is_replaced_and_the_reset_reported(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    first = run_command(client, conversation, "echo keep > note.txt")
    (container,), (volume,) = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    docker_client.containers.get(container).remove(force=True)
    docker_client.volumes.get(volume).remove(force=True)

    replaced = run_command(client, conversation, "cat note.txt")

    assert replaced["workspaceReset"] is True
    assert replaced["workspaceResetReason"] == "workspace_missing"
    assert replaced["sessionId"] != first["sessionId"]
    assert replaced["exitCode"] == 1  # a fresh workspace: the file is gone
    state = client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers()).json()
    assert state["generation"] == 2


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_stopped_or_killed_container_is_started_again_with_its_files_and_packages(
    docker_service: ServiceProcess, docker_client: docker.DockerClient, how: str
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    first = run_command(client, conversation, "echo keep > note.txt && touch /opt/installed")
    (container,), _ = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    getattr(docker_client.containers.get(container), how)()

    again = run_command(client, conversation, "cat note.txt && ls /opt/installed")

    assert again["workspaceReset"] is False and again["sandboxRecreated"] is False
    assert again["resumed"] == "stopped"
    assert again["sessionId"] == first["sessionId"]
    assert again["stdout"] == "keep\n/opt/installed\n"


def test_a_container_paused_by_hand_is_thawed_by_the_next_call(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    run_command(client, conversation, "echo keep > note.txt")
    run_command(client, conversation, "true")  # the channel is open and trusted
    (container,), _ = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    docker_client.containers.get(container).pause()
    time.sleep(0.5)  # the engine's event reaches the service

    started = time.monotonic()
    again = run_command(client, conversation, "cat note.txt")

    assert time.monotonic() - started < 10  # not the command's timeout
    assert again["exitCode"] == 0 and again["timedOut"] is False
    assert again["stdout"] == "keep\n" and again["resumed"] == "paused"


def test_timeout_kills_the_whole_process_group(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    result = run_command(
        client, conversation, "sleep 301 & echo started; sleep 302", timeoutSeconds=2
    )
    survivors = run_command(client, conversation, "ps -eo args | grep -c '^sleep 30[12]' || true")

    assert result["timedOut"] is True
    assert result["timeoutSeconds"] == 2
    assert result["exitCode"] in (124, 137)
    assert result["stdout"] == "started\n"
    assert result["durationMs"] >= 2000
    assert survivors["stdout"] == "0\n"


def test_timeout_is_capped_by_the_deployment_maximum(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    service = start_service(
        "docker", SIESTA_COMMAND__MAX_TIMEOUT_SECONDS="1", SIESTA_COMMAND__KILL_GRACE_SECONDS="1"
    )
    result = run_command(service.client, new_conversation(), "sleep 30", timeoutSeconds=600)
    assert result["timeoutSeconds"] == 1
    assert result["timedOut"] is True  # after 1 s: uncapped, `sleep 30` would have ended


def test_nonzero_exit_is_a_result_not_an_error(sandbox_service: ServiceProcess) -> None:
    result = run_command(
        sandbox_service.client, new_conversation(), "echo out; echo err >&2; exit 7"
    )
    assert (result["exitCode"], result["stdout"], result["stderr"]) == (7, "out\n", "err\n")
    assert result["timedOut"] is False


def test_output_flood_is_capped_while_produced(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    run_command(client, conversation, "true")  # provision first: measure the flood alone
    peak_before = sandbox_service.peak_rss_kb()

    one_gb = 1024**3
    result = run_command(
        client,
        conversation,
        f"echo FIRST; head -c {one_gb} /dev/zero | tr '\\0' x; echo; echo LAST; "
        "head -c 300000 /dev/zero >&2",
        timeoutSeconds=120,
    )

    peak_growth_mb = (sandbox_service.peak_rss_kb() - peak_before) / 1024
    truncated = result["truncated"]
    assert result["exitCode"] == 0
    assert truncated["stdout"] is True and truncated["stderr"] is True
    assert truncated["stdoutBytes"] == one_gb + len("FIRST\n\nLAST\n")
    assert truncated["stderrBytes"] == 300000
    assert result["stdout"].startswith("FIRST\nxxx")
    assert result["stdout"].endswith("xxx\nLAST\n")
    assert "bytes of output dropped" in result["stdout"]
    assert len(result["stdout"].encode()) < truncated["limitBytes"] + 100
    assert peak_growth_mb < 8, f"service memory grew by {peak_growth_mb:.1f} MB"


def test_orgs_are_isolated_even_with_the_same_conversation_id(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    a = run_command(client, conversation, "echo secret-of-a > s.txt", org="org-a")
    b = run_command(client, conversation, "cat s.txt", org="org-b")
    deleted_by_b = client.delete(f"/v1/conversations/{conversation}", headers=headers(org="org-b"))
    a_again = run_command(client, conversation, "cat s.txt", org="org-a")

    assert a["sessionId"] != b["sessionId"]
    assert b["exitCode"] == 1 and "secret" not in b["stdout"]
    assert deleted_by_b.json() == {"deleted": True, "sessionId": b["sessionId"], "deletedFiles": 0}
    assert a_again["stdout"] == "secret-of-a\n"
    assert a_again["sessionId"] == a["sessionId"]
    containers, _ = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    assert containers == [f"siesta-{a['sessionId']}"]
    labels = docker_client.containers.get(containers[0]).labels
    assert labels[ORG_LABEL] == "org-a"


def test_delete_tears_down_container_and_volume(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    first = run_command(client, conversation, "echo data > f.txt")
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation}) != ([], [])

    deleted = client.delete(f"/v1/conversations/{conversation}", headers=headers())
    again = client.delete(f"/v1/conversations/{conversation}", headers=headers())

    assert deleted.json() == {"deleted": True, "sessionId": first["sessionId"], "deletedFiles": 0}
    assert again.json() == {"deleted": False, "sessionId": None, "deletedFiles": 0}
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation}) == ([], [])
    assert (
        client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers()).status_code
        == 404
    )
    fresh = run_command(client, conversation, "cat f.txt")
    assert fresh["exitCode"] == 1
    assert fresh["workspaceReset"] is False  # a new conversation life, not a lost sandbox
