"""The service image (Dockerfile, scripts/build-image.sh): built here as its guide
says (docs/guides/service-image.md), run next to the host's Docker engine with a Redis
store, it becomes ready, runs a command in a sandbox, checks its own health, and serves
as the reconciliation job too; the guide's own ``docker run`` lines run it as well."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import httpx
import pytest

from tests.docs_examples import docs_example
from tests.helpers import (
    REPO,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    TOKEN,
    free_port,
    headers,
    new_conversation,
    wait_until,
)
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TAG = f"test-{TEST_RUN_ID}"
IMAGE = f"siesta/runtime:{TAG}"
SOCKET = "/var/run/docker.sock"
GUIDE = "docs/guides/service-image.md"
ESCAPE_PROBE = (
    "var mw = siestaHost.__getattribute__; var ga = mw.__reduce__()[0]; "
    "ga('{0.__class__.__init__.__globals__[sys].modules[os].environ}', 'format')(siestaHost)"
)


@pytest.fixture(scope="module")
def service_image(docker_client: docker.DockerClient) -> Iterator[str]:
    built = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", docs_example(GUIDE, "make image")],
        cwd=REPO,
        env={**os.environ, "TAG": TAG},
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    yield IMAGE
    docker_client.images.remove(IMAGE, force=True)


def container_environment(redis: RedisServer, port: int) -> dict[str, str]:
    return {
        "SIESTA_API_TOKEN": TOKEN,
        "SIESTA_HTTP__PORT": str(port),
        "SIESTA_STORE__URL": redis.url,
        "SIESTA_DEPLOYMENT_ID": f"image-{TEST_RUN_ID}",
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({TEST_RUN_LABEL: TEST_RUN_ID}),
        "SIESTA_POOL__ENABLED": "false",
    }


# The host's engine through its socket (with the socket's group, not as root); the
# host's network (to reach the tests' Redis on 127.0.0.1).
VOLUMES = {SOCKET: {"bind": SOCKET, "mode": "rw"}}
LABELS = {TEST_RUN_LABEL: TEST_RUN_ID}


def socket_group() -> list[str]:
    return [str(os.stat(SOCKET).st_gid)]


def test_the_service_image_serves_sandboxes(
    service_image: str, docker_client: docker.DockerClient, redis_server: RedisServer
) -> None:
    port = free_port()
    environment = container_environment(redis_server, port)
    container = docker_client.containers.run(
        service_image,
        detach=True,
        environment=environment,
        network_mode="host",
        userns_mode="host",  # the engine remaps users; the host network needs the host's
        # Outside the remapping, the image's own files are not uid 10001's: its data
        # folder is a fresh one.
        tmpfs={"/var/lib/siesta": "uid=10001,gid=10001"},
        volumes=VOLUMES,
        group_add=socket_group(),
        labels=LABELS,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
    try:
        ready = wait_until(lambda: _status(client, "/readyz") == 200, timeout=60)
        assert ready, container.logs(tail=50).decode(errors="replace")
        conversation = new_conversation()
        response = client.post(
            f"/v1/conversations/{conversation}/sandbox/runCommand",
            json={"command": "echo from the image; cat /proc/1/comm"},
            headers=headers(),
        )
        script = client.post(
            f"/v1/conversations/{conversation}/js",
            json={"code": "[1 + 1, typeof process]"},
            headers=headers(),
        )
        probe = client.post(
            f"/v1/conversations/{conversation}/js", json={"code": ESCAPE_PROBE}, headers=headers()
        )
        healthy = wait_until(lambda: _health(docker_client, container.name or "") == "healthy", 60)
        user = docker_client.api.inspect_container(container.name or "")["Config"]["User"]
        reconcile = docker_client.containers.run(
            service_image,
            ["reconcile", "--dry-run"],
            remove=True,
            environment={k: v for k, v in environment.items() if k != "SIESTA_API_TOKEN"},
            network_mode="host",
            userns_mode="host",
            tmpfs={"/var/lib/siesta": "uid=10001,gid=10001"},
            volumes=VOLUMES,
            group_add=socket_group(),
            labels=LABELS,
        )
        deleted = client.delete(f"/v1/conversations/{conversation}", headers=headers())
    finally:
        client.close()
        container.remove(force=True)

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["exitCode"], body["stdout"]) == (0, "from the image\nsiesta-agent\n")
    # JavaScript runs in the image's (unprivileged) jail, and reaches no Python
    assert script.status_code == 200, script.text
    assert script.json()["result"] == '[2,"undefined"]'
    assert probe.json()["error"]["message"] == "ReferenceError: siestaHost is not defined"
    assert TOKEN not in probe.text
    assert healthy  # the image's HEALTHCHECK, on /healthz
    assert user == "10001"  # not root
    summary = json.loads(reconcile)
    assert summary["dryRun"] is True
    assert summary["found"]["sessions"] >= 1
    assert deleted.status_code < 300


def test_the_image_has_no_compiler_and_runs_as_a_non_root_user(
    service_image: str, docker_client: docker.DockerClient
) -> None:
    output = docker_client.containers.run(
        service_image,
        entrypoint=["sh", "-c", "id -u; command -v gcc cc make || echo none"],
        remove=True,
        labels=LABELS,
    )
    assert output.decode().split() == ["10001", "none"]


@pytest.mark.parametrize(
    "first_line",
    ["install -d -o 10001", "docker run -d --name siesta -p 127.0.0.1:8080:8080"],
    ids=["next-to-one-engine", "three-names"],
)
def test_the_guides_docker_run_serves(
    first_line: str, service_image: str, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """The guide's lines as written, but for what must not collide with the machine's:
    the name, the port, the data folder, the tag; and the labels that find what it made."""
    port = free_port()
    name = f"siesta-guide-{TEST_RUN_ID}"
    (tmp_path / ".siesta").mkdir()
    data = tmp_path / "data"  # the first block makes it; the three names' reuses it
    subprocess.run(["install", "-d", "-o", "10001", "-g", "10001", str(data)], check=True)
    (tmp_path / ".siesta" / "api-token").write_text(TOKEN + "\n")
    labels = json.dumps({TEST_RUN_LABEL: TEST_RUN_ID})
    code = (
        docs_example(GUIDE, first_line)
        .replace("siesta/runtime:1", service_image)
        .replace("--name siesta ", f"--name {name} ")
        .replace("--volumes-from siesta ", f"--volumes-from {name} ")
        .replace("/srv/siesta", str(data))
        .replace(":8080:8080", f":{port}:8080")
        .replace("-p 8080:8080", f"-p {port}:8080")
        .replace(
            "docker run ",
            f"docker run --label {TEST_RUN_LABEL}={TEST_RUN_ID} -e SIESTA_POOL__ENABLED=false "
            f"-e SIESTA_SANDBOX__EXTRA_LABELS='{labels}' ",
        )
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:
        ran = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        ready = wait_until(lambda: _status(client, "/readyz") == 200, timeout=60)
        assert ready, docker_client.containers.get(name).logs(tail=50).decode(errors="replace")
        images = client.get("/v1/images", headers=headers())
        console = client.get("/console", headers={"Host": "console.example.com"})
        elsewhere = client.get("/console")
    finally:
        client.close()
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.containers.get(name).remove(force=True)
    assert images.status_code == 200, images.text  # the token from .siesta/api-token
    if "reconcile --dry-run" in code:
        container_id, summary = ran.stdout.split("\n", 1)  # `docker run -d`, then reconcile's
        assert json.loads(summary)["dryRun"] is True, container_id
    if "SIESTA_CONSOLE__HOST" in code:  # the console on its own name only
        assert console.status_code == 303, console.text  # to its sign-in page
        assert console.headers["location"].startswith("/console")
        assert elsewhere.status_code == 421, elsewhere.text


def _status(client: httpx.Client, path: str) -> int:
    try:
        return client.get(path).status_code
    except httpx.HTTPError:
        time.sleep(0.2)
        return 0


def _health(client: docker.DockerClient, container_id: str) -> str:
    state = client.api.inspect_container(container_id)["State"]
    return str((state.get("Health") or {}).get("Status", ""))
