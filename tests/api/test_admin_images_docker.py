"""Building catalog images while the service runs, across two service processes on one
Redis and one Docker engine: one instance builds, the other streams the build and
serves sandboxes of it; a rebuild changes new sandboxes only; a retired version
refuses new conversations and keeps the ones it has."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
import redis

from runtime.images.build import SANDBOX_IMAGE_LABEL
from runtime.store import keys
from tests.helpers import TOKEN, ServiceProcess, StartService, headers, run_cli
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.redis]

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
DOCKERFILE = "FROM siesta/debian-base:1\nRUN date +%s%N > /etc/tiny-build\n"


@pytest.fixture(scope="module")
def pair(
    start_service: StartService, redis_server: RedisServer
) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    url = redis_server.url.rsplit("/", 1)[0] + "/7"  # this module's own database
    with redis.Redis.from_url(url) as connection:
        connection.flushdb()
    yield (
        start_service("docker", SIESTA_STORE__URL=url),
        start_service("docker", SIESTA_STORE__URL=url),
    )


@pytest.fixture
def image_id(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"tiny-{uuid.uuid4().hex[:8]}"
    yield name
    for image in docker_client.images.list(filters={"label": f"{SANDBOX_IMAGE_LABEL}={name}:1"}):
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(str(image.id), force=True)


def follow(service: ServiceProcess, build_id: str) -> tuple[list[str], dict[str, Any]]:
    """The build's server-sent events: its log lines, and the build at its end."""
    lines: list[str] = []
    done: dict[str, Any] = {}
    with service.client.stream(
        "GET", f"/v1/admin/image-builds/{build_id}/events", headers=ADMIN, timeout=300
    ) as events:
        event = ""
        for line in events.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "log":
                lines.append(json.loads(line.removeprefix("data: ")))
            elif line.startswith("data: ") and event == "done":
                done = json.loads(line.removeprefix("data: "))
    return lines, done


def wait_built(service: ServiceProcess, build_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        build: dict[str, Any] = service.client.get(
            f"/v1/admin/image-builds/{build_id}", headers=ADMIN
        ).json()
        if build["state"] != "running":
            return build
        time.sleep(0.3)
    msg = f"build {build_id} still running"
    raise AssertionError(msg)


def run(service: ServiceProcess, conversation: str, image: str, command: str) -> Any:
    return service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        headers=headers(image=image),
        json={"command": command},
    )


def sandbox(service: ServiceProcess, conversation: str) -> dict[str, Any]:
    found: dict[str, Any] = service.client.get(
        f"/v1/conversations/{conversation}/sandbox", headers=headers()
    ).json()
    return found


def test_the_shipped_images_are_seeded_with_their_digests(
    pair: tuple[ServiceProcess, ServiceProcess], docker_client: docker.DockerClient
) -> None:
    listed = {
        i["ref"]: i for i in pair[1].client.get("/v1/admin/images", headers=ADMIN).json()["images"]
    }
    base = listed["debian-base:1"]
    assert base["digest"] == docker_client.images.get("siesta/debian-base:1").id
    assert base["state"] == "enabled" and base["default"] and base["builtAt"] > 0


def test_build_on_one_instance_serve_on_the_other_rebuild_then_retire(
    pair: tuple[ServiceProcess, ServiceProcess], image_id: str
) -> None:
    one, two = pair
    ref = f"{image_id}:1"
    added = one.client.post(
        "/v1/admin/images",
        headers=ADMIN,
        json={"id": image_id, "tag": "1", "title": "Tiny", "source": {"dockerfile": DOCKERFILE}},
    )
    assert added.status_code == 201, added.text
    assert added.json()["image"]["state"] == "disabled"
    build = added.json()["build"]
    assert build["state"] == "running"
    again = one.client.post(f"/v1/admin/images/{ref}/builds", headers=ADMIN)
    assert again.status_code == 409 and again.json()["error"]["code"] == "image_build_running"

    lines, done = follow(two, build["buildId"])  # the other instance streams it
    assert done["state"] == "succeeded", lines
    first_digest = done["digest"]
    assert first_digest.startswith("sha256:")
    assert (
        any("tiny-build" in line for line in lines) and f"built siesta-catalog/{ref}" in lines[-1]
    )

    enabled = one.client.post(
        f"/v1/admin/images/{ref}/state", headers=ADMIN, json={"state": "enabled"}
    )
    assert enabled.json()["digest"] == first_digest
    old = run(two, "c-old", image_id, "cat /etc/tiny-build")
    assert old.status_code == 200, old.text
    old_stamp = old.json()["stdout"]
    assert sandbox(two, "c-old")["imageRef"] == first_digest

    rebuilt = one.client.post(
        f"/v1/admin/images/{ref}/builds", headers=ADMIN, params={"noCache": "true"}
    )
    assert rebuilt.status_code == 202, rebuilt.text
    second = wait_built(two, rebuilt.json()["buildId"])
    assert second["state"] == "succeeded" and second["digest"] != first_digest

    # The conversation made before keeps its build; a new one gets the new build.
    assert run(two, "c-old", image_id, "cat /etc/tiny-build").json()["stdout"] == old_stamp
    new = run(one, "c-new", image_id, "cat /etc/tiny-build")
    assert new.status_code == 200 and new.json()["stdout"] != old_stamp
    assert sandbox(one, "c-new")["imageRef"] == second["digest"]

    retired = two.client.post(
        f"/v1/admin/images/{ref}/state", headers=ADMIN, json={"state": "retired"}
    )
    assert retired.json()["sessionCount"] == 2
    refused = run(one, "c-later", image_id, "true")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "image_retired"
    assert run(one, "c-old", image_id, "true").status_code == 200

    audit = two.client.get("/v1/admin/audit", headers=ADMIN, params={"target": ref}).json()
    assert [e["action"] for e in audit["entries"]] == [
        "image.retire",
        "image.build",
        "image.enable",
        "image.build",
        "image.add",
    ]
    for conversation in ("c-old", "c-new"):
        one.client.delete(f"/v1/conversations/{conversation}", headers=headers())


def test_a_build_from_the_command_line_brings_the_live_catalog_up_to_date(
    pair: tuple[ServiceProcess, ServiceProcess], docker_client: docker.DockerClient
) -> None:
    one, two = pair
    # The store holds a digest the engine no longer has (a build made while the
    # service ran elsewhere, say): the command line's build corrects it.
    with redis.Redis.from_url(one.env["SIESTA_STORE__URL"], decode_responses=True) as store:
        body = json.loads(store.hget(keys.CATALOG_IMAGES, "debian-base:1") or "{}")
        store.hset(keys.CATALOG_IMAGES, "debian-base:1", json.dumps({**body, "digest": "sha256:0"}))
    environment = {**os.environ, **one.env, "SIESTA_DATA_DIR": str(one.data_dir)}
    built = run_cli("images", "build", "debian-base", env=environment, timeout=900)
    assert built.returncode == 0, built.stderr
    assert "the live catalog now has their new digests: debian-base:1" in built.stdout
    image = two.client.get("/v1/admin/images/debian-base:1", headers=ADMIN).json()
    assert image["digest"] == docker_client.images.get("siesta/debian-base:1").id
