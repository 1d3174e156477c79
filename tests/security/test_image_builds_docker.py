"""Builds stay inside the catalog, on a real engine through a real service: a build
never tags an image the deployment runs, an inline Dockerfile sees the catalog's
shared sources alone, its steps reach only the egress proxy (and through it only the
allowlist), and its log never shows the service's secrets.

The service allows the Debian mirror of the sandbox images' apt sources."""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from runtime.images.build import SANDBOX_IMAGE_LABEL
from tests.helpers import (
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    TOKEN,
    ServiceProcess,
    StartService,
    free_port,
)

pytestmark = [pytest.mark.docker]

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
MASK = "\u2022" * 6


@pytest.fixture(scope="module")
def service(start_service: StartService, mirror: str) -> ServiceProcess:
    return start_service("docker", SIESTA_EGRESS__ALLOW=mirror)


@pytest.fixture
def image_id(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"confined-{uuid.uuid4().hex[:8]}"
    yield name
    for image in docker_client.images.list(filters={"label": f"{SANDBOX_IMAGE_LABEL}={name}:1"}):
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(str(image.id), force=True)


def add(service: ServiceProcess, image_id: str, dockerfile: str, **extra: str) -> Any:
    return service.client.post(
        "/v1/admin/images",
        headers=ADMIN,
        json={
            "id": image_id,
            "tag": "1",
            "title": "Confined",
            "source": {"dockerfile": dockerfile},
            **extra,
        },
    )


def finished(service: ServiceProcess, build_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        build: dict[str, Any] = service.client.get(
            f"/v1/admin/image-builds/{build_id}", headers=ADMIN
        ).json()
        if build["state"] != "running":
            return build
        time.sleep(0.3)
    msg = f"build {build_id} still running"
    raise AssertionError(msg)


@pytest.fixture
def runtime_image(docker_client: docker.DockerClient) -> Iterator[str]:
    """``siesta/runtime:1`` as this engine has it, or a labelled stand-in made for the test."""
    reference = "siesta/runtime:1"
    try:
        docker_client.images.get(reference)
        yield reference
        return
    except docker.errors.ImageNotFound:
        pass
    dockerfile = f"FROM debian:bookworm-slim\nLABEL {TEST_RUN_LABEL}={TEST_RUN_ID}\n"
    stand_in, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=reference, network_mode="none", rm=True
    )
    yield reference
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(str(stand_in.id), force=True)


@pytest.mark.parametrize("name", ["debian:bookworm-slim", "runtime"])
def test_a_build_never_tags_an_image_the_deployment_runs(
    service: ServiceProcess,
    docker_client: docker.DockerClient,
    image_id: str,
    runtime_image: str,
    name: str,
) -> None:
    reference = runtime_image if name == "runtime" else name
    before = docker_client.images.get(reference).id
    dockerfile = f"FROM siesta/debian-base:1\nRUN echo {uuid.uuid4().hex} > /replaced\n"
    answer = add(service, image_id, dockerfile, image=reference)
    if answer.status_code == 201 and answer.json()["build"]:  # today's main: it builds
        finished(service, answer.json()["build"]["buildId"])
    assert docker_client.images.get(reference).id == before
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == "image_name_outside_catalog"
    assert error["expected"] == f"siesta-catalog/{image_id}:1"


def test_an_inline_dockerfile_sees_the_shared_sources_alone(
    service: ServiceProcess, image_id: str
) -> None:
    refused = add(service, image_id, "FROM siesta/debian-base:1\nADD http://169.254.169.254/ /m\n")
    assert (
        refused.status_code == 422 and refused.json()["error"]["code"] == "dockerfile_not_allowed"
    )
    dockerfile = (
        "FROM siesta/debian-base:1\nCOPY siesta-fs/siesta-fs.c /src/\nCOPY catalog.yaml /leaked\n"
    )
    build = finished(service, add(service, image_id, dockerfile).json()["build"]["buildId"])
    assert build["state"] == "failed"
    assert "catalog.yaml" in build["error"]  # not in the context: COPY finds nothing


@pytest.fixture
def host_port() -> Iterator[int]:
    """A TCP server on all of the host's addresses, as many host services are."""
    server = socket.create_server(("0.0.0.0", free_port()))
    server.settimeout(0.2)

    def accept() -> None:
        while server.fileno() != -1:
            with contextlib.suppress(OSError):
                server.accept()[0].close()

    threading.Thread(target=accept, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


def test_build_steps_reach_the_allowlist_through_the_proxy_and_nothing_else(
    service: ServiceProcess,
    docker_client: docker.DockerClient,
    image_id: str,
    mirror: str,
    host_port: int,
) -> None:
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    # An engine may leave the default bridge's gateway out of its answer: it is then
    # the subnet's first address, where Docker puts it.
    gateway = config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
    dockerfile = "\n".join(
        [
            "FROM siesta/debian-base:1",
            f"RUN echo {uuid.uuid4().hex}",  # no cached step: every one runs
            "RUN curl -sS -m 5 --noproxy '*' http://169.254.169.254/ ; echo metadata=$?",
            f"RUN timeout 3 bash -c 'echo > /dev/tcp/{gateway}/{host_port}' "
            "&& echo host=open || echo host=closed",
            f"RUN curl -sS -m 20 -o /dev/null -w 'mirror=%{{http_code}}\\n' http://{mirror}/debian/",
            "RUN curl -sS -m 20 http://example.com/ ; echo other=$?",
            f"RUN echo token={TOKEN}",
            "RUN echo proxy=$HTTP_PROXY && "
            "echo password=$(echo $HTTP_PROXY | cut -d@ -f1 | cut -d: -f3)",
            "",
        ]
    )
    answer = add(service, image_id, dockerfile)
    assert answer.status_code == 201, answer.text
    build = finished(service, answer.json()["build"]["buildId"])
    log = "\n".join(
        service.client.get(f"/v1/admin/image-builds/{build['buildId']}", headers=ADMIN).json()[
            "log"
        ]
    )
    assert build["state"] == "succeeded", log
    assert re.search(r"metadata=[1-9]", log), log  # no route but to the proxy
    assert "host=closed" in log  # the host's own services are fenced off
    assert "mirror=200" in log  # the allowlisted mirror, through the proxy
    assert "example.com:80 is not in the egress allowlist" in log
    assert TOKEN not in log and f"token={MASK}" in log
    assert f"proxy={MASK}" in log and f"password={MASK}" in log and "s1." not in log
    image = service.client.get(f"/v1/admin/images/{image_id}:1", headers=ADMIN).json()
    assert image["image"] == f"siesta-catalog/{image_id}:1"
    built = docker_client.images.get(image["image"])
    assert built.id == build["digest"]
    assert "s1." not in json.dumps(built.history())  # the build's proxy credentials stay out


def test_without_an_allowlist_build_steps_have_no_network(
    start_service: StartService, image_id: str
) -> None:
    closed = start_service("docker")  # no SIESTA_EGRESS__ALLOW: sandboxes have no network
    dockerfile = (
        f"FROM siesta/debian-base:1\nRUN echo {uuid.uuid4().hex}\n"
        "RUN curl -sS -m 5 -o /dev/null http://deb.debian.org/debian/ ; echo direct=$?\n"
        "RUN cat /proc/net/route | wc -l | sed 's/^/routes=/'\n"
    )
    answer = add(closed, image_id, dockerfile)
    assert answer.status_code == 201, answer.text
    build = finished(closed, answer.json()["build"]["buildId"])
    log = "\n".join(
        closed.client.get(f"/v1/admin/image-builds/{build['buildId']}", headers=ADMIN).json()["log"]
    )
    assert build["state"] == "succeeded", log
    assert re.search(r"direct=[1-9]", log), log
    assert "routes=1" in log  # the header line alone: no interface but loopback
