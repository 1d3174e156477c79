"""Soak: a few hundred sessions created, used, suspended, resumed and deleted.

Bounded: 200 sessions, 8 at a time. Ends with nothing leaked (containers,
volumes, records, files) and the service's memory flat.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
import uuid

import docker
import pytest

from runtime.store.sqlite import SqliteStore
from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    call,
    headers,
    run_command,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SESSIONS = 200
PARALLEL = 8


def lifetime(service: ServiceProcess, conversation: str, phase: str) -> str | None:
    """One phase of one session's life; returns how it was resumed, if it was."""
    client = service.client
    if phase == "create":
        run_command(client, conversation, "echo data > d.txt")
        call(client, conversation, "writeFile", {"path": "w.txt", "content": "x" * 1000})
        return None
    if phase == "resume":
        result = run_command(client, conversation, "cat d.txt w.txt | wc -c")
        assert result["stdout"] == "1005\n" and result["workspaceReset"] is False
        resumed: str | None = result["resumed"]
        return resumed
    response = client.delete(f"/v1/conversations/{conversation}", headers=headers())
    assert response.status_code == 200 and response.json()["deleted"] is True
    return None


def test_soak(start_service: StartService, docker_client: docker.DockerClient) -> None:
    labels = {TEST_RUN_LABEL: TEST_RUN_ID, "siesta.test-service": f"soak-{uuid.uuid4().hex[:6]}"}
    service = start_service(
        "docker",
        SIESTA_SANDBOX__EXTRA_LABELS=json.dumps(labels),
        SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS="1",
        SIESTA_LIFECYCLE__STOP_AFTER_SECONDS="3",
        SIESTA_RECONCILE__BACKGROUND="true",
        SIESTA_RECONCILE__INTERVAL_SECONDS="0.5",
        SIESTA_CAPACITY__MAX_ACTIVE_PER_USER="1000",
        SIESTA_CAPACITY__MAX_ACTIVE_PER_ORG="1000",
        SIESTA_CAPACITY__MAX_ACTIVE_PER_HOST="1000",
    )
    conversations = [f"soak-{i:03d}" for i in range(SESSIONS)]

    def phase(name: str, batch: list[str]) -> list[str | None]:
        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            return list(pool.map(lambda c: lifetime(service, c, name), batch))

    phase("create", conversations[:40])  # warm up, then measure memory
    rss_warm = service.rss_kb()
    phase("create", conversations[40:])
    time.sleep(4)  # idle: the background reconciler pauses, then stops them
    resumed = phase("resume", conversations)
    phase("delete", conversations)
    rss_end = service.rss_kb()

    assert set(resumed) <= {"paused", "stopped"} and resumed.count("stopped") > SESSIONS // 2
    label = f"siesta.test-service={labels['siesta.test-service']}"
    assert docker_client.containers.list(all=True, filters={"label": label}) == []
    assert docker_client.volumes.list(filters={"label": label}) == []
    store = SqliteStore(service.data_dir / "siesta.db")
    try:
        assert store.list_sessions() == []
        assert store.slot_members("org:org-a") == []
    finally:
        store.close()
    assert [p for p in (service.data_dir / "blobs").rglob("*") if p.is_file()] == []
    growth_mb = (rss_end - rss_warm) / 1024
    assert growth_mb < 25, f"service memory grew by {growth_mb:.1f} MB over {SESSIONS} sessions"
