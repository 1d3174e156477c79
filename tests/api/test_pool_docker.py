"""The warm pool on real Docker: claims, refills, races, trimming, capacity.

Pool members are containers labelled ``siesta.pool=<image>``; a conversation's
first operation takes one (its sandbox is a former member) and the pool fills
up again in the background.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import pytest

from runtime.seams.providers import POOL_LABEL
from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    container_states,
    headers,
    new_conversation,
    run_command,
    run_reconcile,
    sandbox_of,
    wait_until,
)
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def pool_env(labels: dict[str, str], **extra: str) -> dict[str, str]:
    return {
        "SIESTA_POOL__ENABLED": "true",
        "SIESTA_POOL__MIN_PER_IMAGE": "2",
        "SIESTA_POOL__MAX_TOTAL": "3",
        "SIESTA_POOL__REFILL_INTERVAL_SECONDS": "0.2",
        "SIESTA_METRICS__FLEET_REFRESH_SECONDS": "0.2",  # `ready` reads the gauge
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps(labels),
        **extra,
    }


def own_labels() -> dict[str, str]:
    """Labels of one test's service, so that its pool is told apart from others'."""
    return {TEST_RUN_LABEL: TEST_RUN_ID, "siesta.test-pool": uuid.uuid4().hex[:8]}


def ready(service: ServiceProcess) -> dict[str, int]:
    """The pool's ready members per image id, as the service counts them (its store;
    its metric names versions, ``id:tag``)."""
    counts = {}
    for line in service.client.get("/metrics").text.splitlines():
        if line.startswith("siesta_pool_members{"):
            version = line.split('image="', 1)[1].split('"', 1)[0]
            counts[version.partition(":")[0]] = int(float(line.split()[-1]))
    return counts


def containers(client: docker.DockerClient, labels: dict[str, str]) -> dict[str, str]:
    """Containers made for this test's pool (claimed ones keep the label): name → status."""
    return container_states(client, [f"{k}={v}" for k, v in labels.items()] + [POOL_LABEL])


def test_a_first_operation_takes_a_ready_sandbox_and_the_pool_fills_again(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    labels = own_labels()
    service = start_service("docker", **pool_env(labels))
    # Both images get members, within the total of 3; all are paused.
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)
    made = containers(docker_client, labels)
    assert set(made.values()) == {"paused"} and len(made) == 3

    conversation = new_conversation()
    image = "python" if ready(service).get("python") else "debian-base"
    result = run_command(service.client, conversation, "echo $PWD; ls -A", image=image)
    sandbox = sandbox_of(service, conversation)
    assert sandbox in made  # it was a pool member
    assert result["stdout"] == "/mnt/work\n"  # and it carried nothing: an empty workspace
    assert result["workspaceReset"] is False
    assert docker_client.containers.get(sandbox).status == "running"
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)  # refilled
    assert 'siesta_pool_claims_total{outcome="hit"} 1.0' in service.client.get("/metrics").text


def test_two_instances_never_overfill_the_pool_nor_give_a_member_twice(
    start_service: StartService,
    docker_client: docker.DockerClient,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    redis_server.flush()
    labels = own_labels()
    env = pool_env(
        labels,
        SIESTA_STORE__URL=redis_server.url,
        SIESTA_POOL__MIN_PER_IMAGE="3",
        SIESTA_POOL__MAX_TOTAL="3",
        SIESTA_IMAGES__CATALOG_PATH=str(_one_image_catalog(tmp_path)),
    )
    first, second = start_service("docker", **env), start_service("docker", **env)
    assert wait_until(lambda: ready(first).get("debian-base") == 3, timeout=60)
    counts = [3]
    conversations = [new_conversation() for _ in range(6)]

    def first_operation(index: int) -> str:
        service = (first, second)[index % 2]
        run_command(service.client, conversations[index], "true")
        counts.append(ready(service).get("debian-base", 0))
        return sandbox_of(service, conversations[index])

    with ThreadPoolExecutor(6) as pool:
        sandboxes = list(pool.map(first_operation, range(6)))
    assert len(set(sandboxes)) == 6  # no member went to two conversations
    assert wait_until(lambda: ready(second).get("debian-base") == 3, timeout=60)
    counts.extend(ready(service).get("debian-base", 0) for service in (first, second))
    assert max(counts) <= 3  # two instances refilling at once never overshoot
    hits = sum(_hits(service.client.get("/metrics").text) for service in (first, second))
    assert hits >= 3  # the three ready members went to first operations
    made = containers(docker_client, labels)
    assert len(made) - len(set(sandboxes) & made.keys()) == 3  # the rest is the pool


def test_reconciliation_trims_members_that_are_gone_or_withdrawn(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    labels = own_labels()
    service = start_service("docker", **pool_env(labels, SIESTA_RECONCILE__BACKGROUND="false"))
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)
    gone = sorted(containers(docker_client, labels))[0]
    docker_client.containers.get(gone).remove(force=True, v=True)
    summary = run_reconcile(service)
    assert gone in summary["actions"]["pool_members_trimmed"]["ids"]
    assert "orphans_removed" not in summary["actions"]  # members are no orphans
    # The pool fills again; then operators withdraw debian-base (in the live catalog):
    # its members go, and none is made while it is withdrawn.
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)
    assert ready(service).get("debian-base", 0) >= 1
    withdrawn = service.client.post(
        "/v1/admin/images/debian-base:1/state", headers=headers(), json={"state": "disabled"}
    )
    assert withdrawn.status_code == 200, withdrawn.text
    summary = run_reconcile(service)
    trimmed = summary["actions"].get("pool_members_trimmed", {}).get("ids", [])
    assert trimmed  # debian-base had members
    assert all(name not in containers(docker_client, labels) for name in trimmed)
    # Both at once: the gauge is a count made every 0.2 s, so it may still show the
    # trimmed members for that long.
    assert wait_until(
        lambda: ready(service).get("python") == 2 and "debian-base" not in ready(service),
        timeout=60,
    )


def test_a_conversation_takes_the_hosts_last_slot_from_a_pool_member(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    labels = own_labels()
    service = start_service(
        "docker",
        **pool_env(
            labels, SIESTA_CAPACITY__MAX_ACTIVE_PER_HOST="3", SIESTA_POOL__MIN_PER_IMAGE="3"
        ),
    )
    # The pool alone fills the host's budget of 3 ...
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)
    # ... yet conversations get sandboxes: a member makes room, or is claimed.
    for _ in range(3):
        assert run_command(service.client, new_conversation(), "echo ok")["stdout"] == "ok\n"


def gauge(service: ServiceProcess, name: str, image: str = "debian-base:1") -> int:
    return int(_sample(service.client.get("/metrics").text, f'{name}{{image="{image}"}}', 0))


def one_image_service(start_service: StartService, tmp_path: Path, **pool: str) -> ServiceProcess:
    """A service of its own whose catalog enables debian-base only, its pool set by ``pool``."""
    catalog = str(_one_image_catalog(tmp_path))
    env = pool_env(own_labels(), SIESTA_IMAGES__CATALOG_PATH=catalog, **pool)
    return start_service("docker", **env)


def test_the_pool_grows_under_a_stream_of_new_conversations_and_shrinks_when_it_stops(
    start_service: StartService, tmp_path: Path
) -> None:
    service = one_image_service(
        start_service,
        tmp_path,
        SIESTA_POOL__MIN_PER_IMAGE="1",
        SIESTA_POOL__MAX_PER_IMAGE="6",
        SIESTA_POOL__MAX_TOTAL="6",
        SIESTA_POOL__DEMAND_WINDOW_SECONDS="25",
        SIESTA_POOL__SURGE_SECONDS="10",
    )
    assert wait_until(lambda: ready(service).get("debian-base") == 1, timeout=60)  # quiet

    for _ in range(4):  # a stream of new conversations: 4 within 2 s
        run_command(service.client, new_conversation(), "true")
        time.sleep(0.5)

    # 4 in a surge, with headroom: 6 ready, made while nobody waited.
    assert gauge(service, "siesta_pool_target") == 6
    assert wait_until(lambda: ready(service).get("debian-base") == 6, timeout=90), [
        line for line in service.client.get("/metrics").text.splitlines() if "pool" in line
    ]
    # The stream stopped: once the window has passed, the pool is back at its floor.
    assert wait_until(lambda: ready(service).get("debian-base") == 1, timeout=60)
    assert gauge(service, "siesta_pool_target") == 1
    metrics = service.client.get("/metrics").text
    assert 'siesta_pool_discarded_total{image="debian-base:1",reason="surplus"} 5.0' in metrics


def test_a_burst_larger_than_the_pool_gets_every_caller_a_sandbox_in_arrival_order(
    start_service: StartService, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    service = one_image_service(
        start_service,
        tmp_path,
        SIESTA_POOL__MAX_PER_IMAGE="2",
        SIESTA_PROVISION__CONCURRENCY="1",  # one sandbox made at a time: a long queue
        SIESTA_CAPACITY__MAX_ACTIVE_PER_USER="50",
    )
    assert wait_until(lambda: ready(service).get("debian-base") == 2, timeout=60)
    arrivals = [new_conversation() for _ in range(10)]
    answers: dict[str, dict[str, object]] = {}

    def first_call(conversation: str) -> None:
        answers[conversation] = run_command(service.client, conversation, "echo ok")

    def claims() -> float:
        metrics = service.client.get("/metrics").text
        name = "siesta_pool_claims_total"
        return sum(_sample(metrics, f'{name}{{outcome="{o}"}}', 0) for o in ("hit", "miss"))

    def seen_more_than(count: float) -> Callable[[], bool]:
        return lambda: claims() > count

    threads = [threading.Thread(target=first_call, args=(c,)) for c in arrivals]
    for thread in threads:
        # The next one arrives once the service has seen this one (it asks the pool,
        # then waits for its turn): the order of arrival is the service's.
        seen = claims()
        thread.start()
        assert wait_until(seen_more_than(seen), timeout=30)
    for thread in threads:
        thread.join()

    assert [answers[c]["stdout"] for c in arrivals] == ["ok\n"] * len(arrivals)
    sandboxes = [docker_client.api.inspect_container(sandbox_of(service, c)) for c in arrivals]
    pooled = [POOL_LABEL in sandbox["Config"]["Labels"] for sandbox in sandboxes]
    # The pool served the first two. The rest were made first come, first served, in
    # turns; a member the pool made again meanwhile may serve any of them.
    assert pooled[:2] == [True, True]
    made = [_created(s) for s, p in zip(sandboxes, pooled, strict=True) if not p]
    assert len(made) >= 4 and made == sorted(made)
    metrics = service.client.get("/metrics").text
    waited = _sample(metrics, "siesta_provision_queue_seconds_count")
    quickly = _sample(metrics, 'siesta_provision_queue_seconds_bucket{le="0.5"}')
    assert waited > quickly  # they did queue: one at a time, eight arriving together


def _created(inspected: dict[str, Any]) -> datetime.datetime:
    # The engine gives nanoseconds with trailing zeros cut; Python parses microseconds.
    stamp = str(inspected["Created"]).rstrip("Z")
    seconds, _, fraction = stamp.partition(".")
    return datetime.datetime.fromisoformat(f"{seconds}.{fraction[:6].ljust(6, '0')}")


def _sample(metrics: str, name: str, default: float | None = None) -> float:
    for line in metrics.splitlines():
        if line.split(" ", 1)[0] == name:
            return float(line.split()[-1])
    if default is not None:
        return default
    msg = f"{name} is not in /metrics"
    raise AssertionError(msg)


def _hits(metrics: str) -> int:
    for line in metrics.splitlines():
        if line.startswith('siesta_pool_claims_total{outcome="hit"}'):
            return int(float(line.split()[-1]))
    return 0


def _one_image_catalog(tmp_path: Path, enabled: str = "debian-base") -> Path:
    path = tmp_path / f"catalog-{enabled}.yaml"
    images = []
    for image_id, ref in (("debian-base", "siesta/debian-base:1"), ("python", "siesta/python:1")):
        images.append(
            f'  - id: {image_id}\n    tag: "1"\n    title: {image_id}\n    image: {ref}\n'
            f"    enabled: {'true' if image_id == enabled else 'false'}\n"
        )
    path.write_text("images:\n" + "".join(images))
    return path
