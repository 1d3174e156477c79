"""The warm pool on real Docker: claims, refills, races, trimming, capacity.

Pool members are containers labelled ``siesta.pool=<image>``; a conversation's
first operation takes one (its sandbox is a former member) and the pool fills
up again in the background.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest

from runtime.providers.base import POOL_LABEL
from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
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
        "SIESTA_POOL__SIZE": "2",
        "SIESTA_POOL__MAX_TOTAL": "3",
        "SIESTA_POOL__REFILL_INTERVAL_SECONDS": "0.2",
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps(labels),
        **extra,
    }


def own_labels() -> dict[str, str]:
    """Labels of one test's service, so that its pool is told apart from others'."""
    return {TEST_RUN_LABEL: TEST_RUN_ID, "siesta.test-pool": uuid.uuid4().hex[:8]}


def ready(service: ServiceProcess) -> dict[str, int]:
    """The pool's ready members per image, as the service counts them (its store)."""
    counts = {}
    for line in service.client.get("/metrics").text.splitlines():
        if line.startswith("siesta_pool_members{"):
            image = line.split('image="', 1)[1].split('"', 1)[0]
            counts[image] = int(float(line.split()[-1]))
    return counts


def containers(client: docker.DockerClient, labels: dict[str, str]) -> dict[str, str]:
    """Containers made for this test's pool (claimed ones keep the label): name → status."""
    filters: dict[str, str | list[str] | bool] = {
        "label": [f"{k}={v}" for k, v in labels.items()] + [POOL_LABEL]
    }
    return {str(c.name): str(c.status) for c in client.containers.list(all=True, filters=filters)}


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
        SIESTA_POOL__SIZE="3",
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
    start_service: StartService, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    labels = own_labels()
    service = start_service("docker", **pool_env(labels, SIESTA_RECONCILE__BACKGROUND="false"))
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)
    gone = sorted(containers(docker_client, labels))[0]
    docker_client.containers.get(gone).remove(force=True, v=True)
    summary = run_reconcile(service)
    assert gone in summary["actions"]["pool_members_trimmed"]["ids"]
    assert "orphans_removed" not in summary["actions"]  # members are no orphans
    # Operators withdraw debian-base: its members go (python's stay).
    catalog = _one_image_catalog(tmp_path, enabled="python")
    summary = run_reconcile(service, SIESTA_IMAGES__CATALOG_PATH=str(catalog))
    trimmed = summary["actions"].get("pool_members_trimmed", {}).get("ids", [])
    assert trimmed  # debian-base had members
    assert all(name not in containers(docker_client, labels) for name in trimmed)


def test_a_conversation_takes_the_hosts_last_slot_from_a_pool_member(
    start_service: StartService, docker_client: docker.DockerClient
) -> None:
    labels = own_labels()
    service = start_service(
        "docker",
        **pool_env(labels, SIESTA_CAPACITY__MAX_ACTIVE_PER_HOST="3", SIESTA_POOL__SIZE="3"),
    )
    # The pool alone fills the host's budget of 3 ...
    assert wait_until(lambda: sum(ready(service).values()) == 3, timeout=60)
    # ... yet conversations get sandboxes: a member makes room, or is claimed.
    for _ in range(3):
        assert run_command(service.client, new_conversation(), "echo ok")["stdout"] == "ok\n"


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
            f"  - id: {image_id}\n    title: {image_id}\n    image: {ref}\n"
            f"    enabled: {'true' if image_id == enabled else 'false'}\n"
        )
    path.write_text("images:\n" + "".join(images))
    return path
