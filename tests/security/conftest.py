"""What the security tests share: the Debian mirror the sandbox images use."""

from __future__ import annotations

import re

import docker
import pytest

from tests.helpers import TEST_RUN_ID, TEST_RUN_LABEL


@pytest.fixture(scope="module")
def mirror(docker_client: docker.DockerClient) -> str:
    """The host of the Debian mirror in the base image's apt sources."""
    sources = docker_client.containers.run(
        "siesta/debian-base:1",
        ["sh", "-c", "cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null; true"],
        remove=True,
        network_mode="none",
        labels={TEST_RUN_LABEL: TEST_RUN_ID},
    ).decode()
    found = re.search(r"https?://([^/\s]+)/", sources)
    assert found, sources
    return found.group(1)
