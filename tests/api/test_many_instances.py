"""Several real service processes on one Redis and one Docker engine.

Each command appends "start"/"end" lines with nanosecond timestamps to a log in
its workspace (plain appends, no flock); the intervals of one conversation
must never overlap, whatever instance ran them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import docker
import httpx
import pytest

from runtime.seams.providers import CONVERSATION_LABEL, ORG_LABEL
from runtime.store.redis import open_redis
from tests.helpers import ServiceProcess, StartService, headers, run_command, run_resources
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]

LEASE_TTL = 3.0
LOGGED = (
    'echo "start $(date +%s%N)" >> /mnt/work/intervals; sleep {pause}; '
    'echo "end $(date +%s%N)" >> /mnt/work/intervals'
)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    # This module's own server: one test restarts it.
    server = RedisServer(tmp_path_factory.mktemp("redis-many"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def instances(
    start_service: StartService, redis_server: RedisServer, docker_client: docker.DockerClient
) -> list[ServiceProcess]:
    return [
        start_service(
            "docker",
            SIESTA_STORE__URL=redis_server.url,
            SIESTA_LEASE__TTL_SECONDS=str(LEASE_TTL),
            SIESTA_LEASE__WAIT_SECONDS="60",
            SIESTA_CAPACITY__MAX_ACTIVE_PER_USER="100",
        )
        for _ in range(3)
    ]


def post_run(
    service: ServiceProcess,
    org: str,
    conversation: str,
    command: str,
    timeout: float = 120,
    **body: Any,
) -> httpx.Response:
    with httpx.Client(base_url=service.base_url, timeout=timeout) as client:
        return client.post(
            f"/v1/conversations/{conversation}/sandbox/runCommand",
            json={"command": command, **body},
            headers=headers(org=org),
        )


def intervals(service: ServiceProcess, org: str, conversation: str) -> list[tuple[int, int]]:
    log = run_command(service.client, conversation, "cat /mnt/work/intervals", org=org)
    lines = [line.split() for line in log["stdout"].splitlines()]
    assert [kind for kind, _ in lines] == ["start", "end"] * (len(lines) // 2), lines
    stamps = [int(stamp) for _, stamp in lines]
    return list(zip(stamps[::2], stamps[1::2], strict=True))


def assert_no_overlap(spans: list[tuple[int, int]]) -> None:
    ordered = sorted(spans)
    for (_, end), (start, _) in itertools.pairwise(ordered):
        assert start >= end, f"two commands overlapped: {ordered}"


def test_200_concurrent_calls_over_20_conversations_on_3_instances(
    instances: list[ServiceProcess],
    redis_server: RedisServer,
    docker_client: docker.DockerClient,
) -> None:
    org = f"org-many-{uuid.uuid4().hex[:6]}"
    conversations = [f"conv-{i:02d}" for i in range(20)]
    calls = [(conversations[i % 20], instances[i % 3]) for i in range(200)]

    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        responses = list(
            pool.map(
                lambda call: post_run(call[1], org, call[0], LOGGED.format(pause="0.05")), calls
            )
        )

    outcomes = [
        "ok" if r.status_code == 200 and r.json()["exitCode"] == 0 else r.json()["error"]["code"]
        for r in responses
    ]
    assert set(outcomes) <= {"ok", "session_busy"}, outcomes
    assert outcomes.count("ok") >= 190  # the 60 s wait makes busy answers unlikely
    store = open_redis(redis_server.url)
    records = {r.conversation: r for r in store.sessions.list_sessions() if r.org == org}
    store.close()
    containers, volumes = run_resources(docker_client, **{ORG_LABEL: org})
    assert sorted(records) == conversations
    assert sorted(containers) == sorted(volumes) == sorted(r.sandbox_id for r in records.values())
    succeeded = Counter(
        conv for (conv, _), outcome in zip(calls, outcomes, strict=True) if outcome == "ok"
    )
    for conversation in conversations:
        spans = intervals(instances[0], org, conversation)
        assert len(spans) == succeeded[conversation]  # every command that ran left its span
        assert_no_overlap(spans)


def test_capacity_is_exact_across_instances(
    start_service: StartService, redis_server: RedisServer, docker_client: docker.DockerClient
) -> None:
    limited = [
        start_service(
            "docker", SIESTA_STORE__URL=redis_server.url, SIESTA_CAPACITY__MAX_ACTIVE_PER_ORG="4"
        )
        for _ in range(2)
    ]
    org = f"org-cap-{uuid.uuid4().hex[:6]}"
    # Every sandbox stays busy (leased) while the others start: nothing can be suspended.
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        responses = list(
            pool.map(lambda i: post_run(limited[i % 2], org, f"conv-{i}", "sleep 4"), range(10))
        )
    codes = [r.status_code for r in responses]
    errors = [r.json()["error"] for r in responses if r.status_code != 200]
    assert codes.count(200) == 4
    assert all(e["code"] == "capacity_unavailable" for e in errors)
    assert all((e["scope"], e["limit"]) == ("org", 4) for e in errors)
    assert len(run_resources(docker_client, **{ORG_LABEL: org})[0]) == 4


def test_a_killed_instance_loses_its_lease_and_another_takes_over(
    start_service: StartService, redis_server: RedisServer, docker_client: docker.DockerClient
) -> None:
    doomed, survivor = (
        start_service(
            "docker",
            SIESTA_STORE__URL=redis_server.url,
            SIESTA_LEASE__TTL_SECONDS=str(LEASE_TTL),
            SIESTA_LEASE__WAIT_SECONDS="30",
        )
        for _ in range(2)
    )
    org, conversation = "org-kill", f"conv-{uuid.uuid4().hex[:6]}"
    run_command(doomed.client, conversation, "true", org=org)
    long_call = threading.Thread(
        target=lambda: _ignore_errors(lambda: post_run(doomed, org, conversation, "sleep 309"))
    )
    long_call.start()
    time.sleep(1.5)  # the long command is running and its lease held
    doomed.kill()

    result = run_command(
        survivor.client, conversation, "ps -eo args | grep -c '^sleep 309' || true", org=org
    )
    long_call.join(10)

    assert result["exitCode"] == 0
    # It got the lease although its holder never released it: the TTL freed it.
    assert result["stdout"] == "0\n"  # the orphaned command was ended before this one ran
    containers, _ = run_resources(docker_client, **{CONVERSATION_LABEL: conversation})
    assert len(containers) == 1


def test_redis_restart_mid_traffic(
    instances: list[ServiceProcess],
    redis_server: RedisServer,
) -> None:
    org = f"org-restart-{uuid.uuid4().hex[:6]}"
    conversations = [f"conv-{i}" for i in range(5)]
    for conversation in conversations:
        run_command(instances[0].client, conversation, "true", org=org)
    stop = threading.Event()
    outcomes: list[tuple[int, str]] = []
    lock = threading.Lock()

    def traffic(index: int) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            service = instances[(index + n) % 2]
            conversation = conversations[(index + n) % len(conversations)]
            try:
                response = post_run(
                    service, org, conversation, LOGGED.format(pause="0.1"), timeout=30
                )
                code = "ok" if response.status_code == 200 else response.json()["error"]["code"]
                status = response.status_code
            except httpx.TransportError as exc:  # not expected: the service stays up
                status, code = 0, type(exc).__name__
            with lock:
                outcomes.append((status, code))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for index in range(8):
            pool.submit(traffic, index)
        time.sleep(2)
        redis_server.stop()
        time.sleep(2)
        redis_server.start()
        time.sleep(LEASE_TTL + 2)
        stop.set()

    seen = {(status, code) for status, code in outcomes}
    assert (503, "state_unavailable") in seen
    assert seen <= {
        (200, "ok"),
        (503, "state_unavailable"),
        (409, "lease_expired"),
        (409, "session_busy"),
    }, seen
    for conversation in conversations:  # recovered by itself
        final = run_command(instances[1].client, conversation, "true", org=org)
        assert final["exitCode"] == 0
        assert_no_overlap(intervals(instances[2], org, conversation))


def _ignore_errors(action: Any) -> None:
    with contextlib.suppress(httpx.TransportError):  # the instance was killed under it
        action()
