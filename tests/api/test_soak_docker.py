"""Soak: forty sessions created, used, suspended, resumed and deleted.

Bounded, for the suite's time budget: 40 sessions, 8 calls at a time; suspension
is done by real reconciliation passes (the CronJob's command), so every session
goes through both tiers whatever the machine's speed. Ends with nothing leaked
(containers, volumes, records, slots, files) and the service's memory flat.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
import uuid
from collections.abc import Callable

import docker
import pytest

from runtime.store.sqlite import open_sqlite
from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    call,
    headers,
    run_command,
    run_reconcile,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SESSIONS = 40
PARALLEL = 8
PAUSE_ONLY = {
    "SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS": "1",
    "SIESTA_LIFECYCLE__STOP_AFTER_SECONDS": "100000",
}
STOP = {"SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS": "1", "SIESTA_LIFECYCLE__STOP_AFTER_SECONDS": "1"}


def create(service: ServiceProcess, conversation: str) -> None:
    run_command(service.client, conversation, "echo data > d.txt")
    call(service.client, conversation, "writeFile", {"path": "w.txt", "content": "x" * 1000})


def use(service: ServiceProcess, conversation: str) -> str | None:
    result = run_command(service.client, conversation, "cat d.txt w.txt | wc -c")
    assert result["stdout"] == "1005\n" and result["workspaceReset"] is False
    resumed: str | None = result["resumed"]
    return resumed


def delete(service: ServiceProcess, conversation: str) -> None:
    response = service.client.delete(f"/v1/conversations/{conversation}", headers=headers())
    assert response.status_code == 200 and response.json()["deleted"] is True


def test_soak(start_service: StartService, docker_client: docker.DockerClient) -> None:
    labels = {TEST_RUN_LABEL: TEST_RUN_ID, "siesta.test-service": f"soak-{uuid.uuid4().hex[:6]}"}
    service = start_service(
        "docker",
        SIESTA_SANDBOX__EXTRA_LABELS=json.dumps(labels),
        SIESTA_RECONCILE__BACKGROUND="false",
        SIESTA_CAPACITY__MAX_ACTIVE_PER_USER="1000",
        SIESTA_CAPACITY__MAX_ACTIVE_PER_ORG="1000",
        SIESTA_CAPACITY__MAX_ACTIVE_PER_HOST="1000",
    )
    conversations = [f"soak-{i:03d}" for i in range(SESSIONS)]
    half = conversations[: SESSIONS // 2]

    def each(
        action: Callable[[ServiceProcess, str], str | None], batch: list[str]
    ) -> list[str | None]:
        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            return list(pool.map(lambda c: action(service, c), batch))

    each(create, conversations[:40])  # warm up, then measure memory
    rss_warm = service.rss_kb()
    each(create, conversations[40:])
    time.sleep(1.2)
    paused = run_reconcile(service, **PAUSE_ONLY)
    resumed_from_pause = each(use, half)
    time.sleep(1.2)
    stopped = run_reconcile(service, **STOP)
    resumed_from_stop = each(use, conversations)
    each(delete, conversations)
    rss_end = service.rss_kb()

    assert paused["actions"]["idle_sessions_paused"]["count"] == SESSIONS
    assert stopped["actions"]["idle_sessions_stopped"]["count"] == SESSIONS
    assert resumed_from_pause == ["paused"] * len(half)
    assert resumed_from_stop == ["stopped"] * SESSIONS
    label = f"siesta.test-service={labels['siesta.test-service']}"
    assert docker_client.containers.list(all=True, filters={"label": label}) == []
    assert docker_client.volumes.list(filters={"label": label}) == []
    store = open_sqlite(service.data_dir / "siesta.db")
    try:
        assert store.sessions.list_sessions() == []
        assert store.capacity.slot_members("org:org-a") == []
    finally:
        store.close()
    assert [p for p in (service.data_dir / "blobs").rglob("*") if p.is_file()] == []
    growth_mb = (rss_end - rss_warm) / 1024
    assert growth_mb < 25, f"service memory grew by {growth_mb:.1f} MB over {SESSIONS} sessions"
