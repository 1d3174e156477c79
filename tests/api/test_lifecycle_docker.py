"""Suspend, resume, retire and reconcile, on real Docker through the real service.

The idle tiers are set to one second and passes are run by the real
``siesta-runtime reconcile`` command (the CronJob's), so the tests control
when a pass happens.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import pytest

from runtime.providers.docker.provider import DockerProvider
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import CONVERSATION_LABEL, ORG_LABEL, SandboxSpec
from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    TOKEN,
    ServiceProcess,
    StartService,
    deployment_of,
    headers,
    new_conversation,
    respawn,
    run_cli,
    run_command,
    run_reconcile,
    run_resources,
    upload,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# A tiny .deb built inside the sandbox: "installing a package" without a network.
BUILD_AND_INSTALL_DEB = """
set -e
mkdir -p pkg/DEBIAN pkg/usr/local/bin
printf 'Package: siesta-hello\\nVersion: 1.0\\nArchitecture: all\\n' > pkg/DEBIAN/control
printf 'Maintainer: t <t@t>\\nDescription: t\\n' >> pkg/DEBIAN/control
printf '#!/bin/sh\\necho hello from a package\\n' > pkg/usr/local/bin/siesta-hello
chmod 755 pkg/usr/local/bin/siesta-hello
dpkg-deb --build pkg hello.deb >/dev/null
dpkg -i hello.deb >/dev/null
"""
# A background process holding ~30 MB, to see that pausing keeps processes and memory.
START_HOLDER = (
    'nohup bash -c \'x=$(head -c 30000000 /dev/zero | tr "\\0" a); echo ready > held; '
    "sleep 1000; echo gone' >/dev/null 2>&1 & echo $!"
)


def tier_env(**tiers: str) -> dict[str, str]:
    return {
        "SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS": tiers.get("pause", "100000"),
        "SIESTA_LIFECYCLE__STOP_AFTER_SECONDS": tiers.get("stop", "200000"),
        "SIESTA_LIFECYCLE__RETIRE_AFTER_SECONDS": tiers.get("retire", "300000"),
        "SIESTA_RECONCILE__ORPHAN_GRACE_SECONDS": tiers.get("grace", "100000"),
        "SIESTA_RECONCILE__BACKGROUND": tiers.get("background", "false"),
    }


def service_labels(service: ServiceProcess) -> dict[str, str]:
    labels: dict[str, str] = json.loads(service.env["SIESTA_SANDBOX__EXTRA_LABELS"])
    return labels


def start(
    start_service: StartService, extra: dict[str, str] | None = None, **tiers: str
) -> ServiceProcess:
    """A service whose sandboxes carry labels of their own, so that passes of its
    reconciler see only them (and never other tests' sandboxes)."""
    labels = {TEST_RUN_LABEL: TEST_RUN_ID, "siesta.test-service": uuid.uuid4().hex[:8]}
    return start_service(
        "docker",
        SIESTA_SANDBOX__EXTRA_LABELS=json.dumps(labels),
        **tier_env(**tiers),
        **(extra or {}),
    )


def reconcile(service: ServiceProcess, *args: str, **tiers: str) -> dict[str, Any]:
    """Run the real CLI against the service's state and Docker labels."""
    return run_reconcile(service, *args, **tier_env(**tiers))


def acted(summary: dict[str, Any], action: str) -> list[str]:
    return list(summary["actions"].get(action, {}).get("ids", []))


def state_of(service: ServiceProcess, conversation: str) -> dict[str, Any]:
    response = service.client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers())
    body: dict[str, Any] = response.json()
    return body


def test_pause_then_resume_keeps_processes_and_memory(start_service: StartService) -> None:
    service = start(start_service, pause="1")
    conversation = new_conversation()
    holder_pid = run_command(service.client, conversation, START_HOLDER)["stdout"].strip()
    run_command(
        service.client, conversation, "for i in $(seq 50); do [ -f held ] && break; sleep 0.2; done"
    )
    rss_before = int(
        run_command(service.client, conversation, f"ps -o rss= -p {holder_pid}")["stdout"]
    )
    time.sleep(1.2)

    summary = reconcile(service, pause="1")
    paused_state = state_of(service, conversation)
    resumed = run_command(service.client, conversation, f"ps -o rss= -p {holder_pid}")

    session_id = paused_state["sessionId"]
    assert acted(summary, "idle_sessions_paused") == [session_id]
    assert (paused_state["status"], paused_state["state"]) == ("paused", "paused")
    assert resumed["resumed"] == "paused" and resumed["workspaceReset"] is False
    assert resumed["exitCode"] == 0  # the same process is still there ...
    assert int(resumed["stdout"]) >= rss_before * 0.9  # ... with its memory
    assert rss_before > 25_000  # KB: the holder really held ~30 MB
    assert state_of(service, conversation)["status"] == "active"


def test_a_sandbox_running_a_process_is_kept_awake_by_a_pass_that_did_not_start_it(
    start_service: StartService,
) -> None:
    """The instance that started the process is killed (its own upkeep kept the sandbox
    awake while it lived); the pass is the CronJob's, with no table of processes: it
    asks the sandbox's agent, which keeps the process running. Once it ends, the
    sandbox is paused like any idle one."""
    service = start(start_service, pause="1")
    conversation = new_conversation()
    url = f"/v1/conversations/{conversation}/sandbox/processes"
    started = service.client.post(url, json={"command": "sleep 600"}, headers=headers())
    assert started.status_code == 201, started.text
    pid = started.json()["pid"]
    session_id = state_of(service, conversation)["sessionId"]
    service.kill()
    time.sleep(1.2)

    kept = reconcile(service, pause="1")
    assert acted(kept, "busy_sandboxes_kept_awake") == [session_id]
    assert not acted(kept, "idle_sessions_paused")
    service = respawn(service)
    assert state_of(service, conversation)["state"] == "running"

    ended = service.client.post(
        f"{url}/{pid}/signal", json={"signal": "SIGKILL"}, headers=headers()
    )
    assert ended.status_code == 204, ended.text
    time.sleep(1.2)
    paused = reconcile(service, pause="1")
    service.stop()
    assert acted(paused, "idle_sessions_paused") == [session_id]
    assert not acted(paused, "busy_sandboxes_kept_awake")


def test_stop_then_resume_keeps_files_and_packages_but_not_processes(
    start_service: StartService,
) -> None:
    service = start(start_service, stop="1")
    conversation = new_conversation()
    run_command(service.client, conversation, BUILD_AND_INSTALL_DEB)
    run_command(
        service.client, conversation, "echo kept > notes.txt; nohup sleep 1001 >/dev/null 2>&1 &"
    )
    time.sleep(1.2)

    summary = reconcile(service, stop="1")
    stopped_state = state_of(service, conversation)
    resumed = run_command(
        service.client,
        conversation,
        "siesta-hello; cat notes.txt; ps -eo args | grep -c '^sleep 1001' || true",
    )

    assert acted(summary, "idle_sessions_stopped") == [stopped_state["sessionId"]]
    assert (stopped_state["status"], stopped_state["state"]) == ("stopped", "stopped")
    assert resumed["resumed"] == "stopped" and resumed["workspaceReset"] is False
    assert resumed["stdout"] == "hello from a package\nkept\n0\n"


def test_retired_session_is_replaced_with_a_reset(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    service = start(start_service, retire="1")
    conversation = new_conversation()
    first = run_command(service.client, conversation, "echo x > f.txt")
    time.sleep(1.2)

    summary = reconcile(service, retire="1")
    retired_state = state_of(service, conversation)
    after = run_command(service.client, conversation, "cat f.txt")

    assert acted(summary, "idle_sessions_retired") == [first["sessionId"]]
    assert retired_state["status"] == "retired"
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation})[0] == [
        f"siesta-{after['sessionId']}"
    ]
    assert after["workspaceReset"] is True and after["workspaceResetReason"] == "retired"
    assert after["exitCode"] == 1


def test_dry_run_plans_without_acting(start_service: StartService) -> None:
    service = start(start_service, pause="1")
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    time.sleep(1.2)
    plan = reconcile(service, "--dry-run", pause="1")
    assert plan["dryRun"] is True
    assert acted(plan, "idle_sessions_paused") == [state_of(service, conversation)["sessionId"]]
    assert state_of(service, conversation)["status"] == "active"


def test_reconciler_keeps_killed_and_removed_sandboxes_with_their_workspaces(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    service = start(start_service)
    killed, removed, gone = new_conversation(), new_conversation(), new_conversation()
    for conversation in (killed, removed, gone):
        run_command(service.client, conversation, "echo kept > keep.txt")
    docker_client.containers.get(f"siesta-{state_of(service, killed)['sessionId']}").kill()
    docker_client.containers.get(f"siesta-{state_of(service, removed)['sessionId']}").remove(
        force=True
    )
    gone_name = f"siesta-{state_of(service, gone)['sessionId']}"
    docker_client.containers.get(gone_name).remove(force=True)
    docker_client.volumes.get(gone_name).remove(force=True)
    # What an instance that crashed between "container created" and "record written" leaves.
    provider = DockerProvider(
        SandboxSettings(extra_labels=service_labels(service)),
        deployment_id=deployment_of(service),
    )
    crashed = new_conversation()
    orphan = provider.lifecycle.create(
        SandboxSpec(
            uuid.uuid4().hex,
            "siesta/debian-base:1",
            {
                ORG_LABEL: "org-a",
                CONVERSATION_LABEL: crashed,
            },
        )
    )
    provider.close()

    first = reconcile(service)  # the orphan is still younger than the grace period
    second = reconcile(service, grace="0")

    # Stopped, or removed with the workspace left: neither is lost, both stop counting.
    assert sorted(acted(first, "stopped_sandboxes_noted")) == sorted(
        state_of(service, c)["sessionId"] for c in (killed, removed)
    )
    assert acted(first, "sessions_marked_lost") == [state_of(service, gone)["sessionId"]]
    assert orphan not in acted(first, "orphans_removed")
    assert acted(second, "orphans_removed") == [orphan]
    assert state_of(service, killed)["status"] == state_of(service, removed)["status"] == "stopped"
    assert state_of(service, gone)["status"] == "lost"
    assert run_resources(docker_client, **{CONVERSATION_LABEL: crashed}) == ([], [])
    again = {c: run_command(service.client, c, "cat keep.txt") for c in (killed, removed, gone)}
    assert again[killed]["stdout"] == again[removed]["stdout"] == "kept\n"
    assert again[killed]["resumed"] == "stopped" and again[killed]["workspaceReset"] is False
    assert again[removed]["sandboxRecreated"] is True and again[removed]["workspaceReset"] is False
    assert again[gone]["workspaceReset"] is True and again[gone]["workspaceResetReason"] == "lost"


def test_background_reconciler_never_removes_a_live_session(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    service = start(
        start_service,
        {"SIESTA_RECONCILE__INTERVAL_SECONDS": "0.2"},
        grace="0",
        background="true",
    )
    org = f"org-live-{uuid.uuid4().hex[:6]}"
    conversations = [new_conversation() for _ in range(4)]
    deadline = time.monotonic() + 8
    results = []
    while time.monotonic() < deadline:
        for conversation in conversations:
            results.append(run_command(service.client, conversation, "sleep 0.1", org=org))
        conversations.append(new_conversation())  # keep provisioning during passes
    assert all(r["exitCode"] == 0 and r["workspaceReset"] is False for r in results)
    containers, volumes = run_resources(docker_client, **{ORG_LABEL: org})
    assert len(containers) == len(volumes) == len(conversations) - 1


def test_deleting_a_busy_conversation_finishes_after_the_operation(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    service = start(start_service, {"SIESTA_LEASE__WAIT_SECONDS": "0.5"})
    conversation = new_conversation()
    upload(service.client, conversation, "a.txt", b"a")
    run_command(service.client, conversation, "true")
    busy = threading.Thread(target=run_command, args=(service.client, conversation, "sleep 3"))
    busy.start()
    time.sleep(1)
    pending = service.client.delete(f"/v1/conversations/{conversation}", headers=headers())
    busy.join()
    summary = reconcile(
        service,
    )

    assert pending.status_code == 202 and pending.json()["deleted"] == "pending"
    assert acted(summary, "deleted_conversations_torn_down") == [f"org-a/{conversation}"]
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation}) == ([], [])
    files = service.client.get(f"/v1/conversations/{conversation}/files", headers=headers())
    assert files.json() == {"files": []}


def test_reconcile_exits_nonzero_without_a_provider(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "SIESTA_DATA_DIR": str(tmp_path),
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",
    }
    result = run_cli("reconcile", env=environment)
    assert result.returncode == 1
    assert "provider_unavailable" in result.stderr


def test_metrics_readiness_and_json_logs(docker_service: ServiceProcess) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "echo SECRET-COMMAND-TEXT")
    docker_service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": ""},
        headers=headers(),
    )
    text = docker_service.client.get("/metrics").text
    ready = docker_service.client.get("/readyz")

    assert 'siesta_operations_total{function="runCommand",outcome="ok"}' in text
    assert 'siesta_operations_total{function="runCommand",outcome="invalid_command"}' in text
    assert "siesta_operation_seconds_bucket" in text
    assert "siesta_provision_seconds_count" in text
    assert 'siesta_sessions{status="active"}' in text
    assert ready.status_code == 200 and ready.json()["checks"] == {"store": "ok", "provider": "ok"}
    log = docker_service.log(tail=None)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    provisioned = [line for line in lines if "provisioned session" in line["message"]]
    assert provisioned and provisioned[-1]["conversation"] == conversation
    assert provisioned[-1]["requestId"]
    assert "SECRET-COMMAND-TEXT" not in log
    assert TOKEN not in log
