"""The image build command, on the real Docker engine."""

from __future__ import annotations

import contextlib
import subprocess
import uuid

import docker
import docker.errors
import pytest

from runtime.images.build import ensure_base_image
from tests.helpers import run_cli

pytestmark = pytest.mark.docker


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=900)


def test_rebuilding_an_unchanged_image_comes_from_the_cache(
    docker_client: docker.DockerClient,
) -> None:
    first = cli("images", "build", "debian-base")
    again = cli("images", "build", "debian-base")
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    steps = [line for line in again.stdout.splitlines() if "---> Running in" in line]
    assert steps == []  # no step ran again: every layer came from the cache
    assert "Using cache" in again.stdout
    assert "built 1 image(s): debian-base:1\n" in again.stdout
    image = docker_client.images.get("siesta/debian-base:1")
    assert image.labels["siesta.sandbox-image"] == "debian-base:1"
    # Containers inherit image labels: nothing on an image may claim ownership.
    assert not any(k in image.labels for k in ("siesta.deployment", "siesta.managed"))


def test_unknown_image_id_is_refused() -> None:
    result = cli("images", "build", "no-such-image")
    assert result.returncode == 1
    assert "not in the image catalog: no-such-image" in result.stderr


def test_images_list_shows_what_is_built(docker_client: docker.DockerClient) -> None:
    result = cli("images", "list")
    assert result.returncode == 0
    assert '"id": "debian-base"' in result.stdout
    assert '"present": true' in result.stdout


@pytest.mark.slow
def test_base_is_debootstrapped_when_it_cannot_be_pulled(
    docker_client: docker.DockerClient,
) -> None:
    # A reference no registry here can serve, so pulling fails as it does on
    # machines without registry access; debootstrap must then create it.
    reference = f"siesta-test/bookworm-slim:{uuid.uuid4().hex[:8]}"
    lines: list[str] = []
    try:
        ensure_base_image(docker_client, lines.append, reference)
        image = docker_client.images.get(reference)
        output = docker_client.containers.run(
            reference, ["cat", "/etc/debian_version"], remove=True
        )
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(reference, force=True)
    assert any("pull failed" in line for line in lines)
    assert any("debootstrap" in line for line in lines)
    assert image.labels == {"siesta.base-origin": "debootstrap"}
    assert output.decode().startswith("12.")
