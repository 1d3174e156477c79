"""Three service instances on one Redis and one Docker engine, behind a round-robin
proxy (``roundrobin.py``): every request lands on the next instance."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker
import httpx
import pytest

from tests.fleet.roundrobin import RoundRobinProxy
from tests.helpers import TOKEN, ServiceProcess, StartService, tokens_setting
from tests.redis_server import RedisServer

E2B_TOKEN = "e2b_" + "f1" * 16
"""A token with the ``sandbox`` scope bound to ``E2B_ORG`` (the E2B SDK's key)."""
E2B_ORG = "org-fleet"
INSTANCES = 3
PORTS_DOMAIN = "e2b-fleet.localhost"
"""E2B's host form of a sandbox's port (``PORT-SANDBOXID.DOMAIN``), sent as ``Host``."""


@dataclass(frozen=True)
class Fleet:
    instances: list[ServiceProcess]
    proxy: RoundRobinProxy

    @property
    def url(self) -> str:
        return self.proxy.url

    def client(self, timeout: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def e2b_options(self) -> dict[str, Any]:
        """What the E2B SDKs take instead of E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY."""
        return {
            "api_key": E2B_TOKEN,
            "api_url": f"{self.url}/e2b",
            "sandbox_url": f"{self.url}/e2b/envd",
        }


@pytest.fixture(scope="module")
def fleet(
    start_service: StartService, redis_server: RedisServer, docker_client: docker.DockerClient
) -> Iterator[Fleet]:
    tokens = tokens_setting(
        ("backend", TOKEN, ["sandbox", "shell", "tools", "approve", "admin"]),
        ("e2b-fleet", E2B_TOKEN, ["sandbox"], E2B_ORG),
    )
    instances = [
        start_service(
            "docker",
            SIESTA_STORE__URL=redis_server.url,
            SIESTA_TOKENS=tokens,
            SIESTA_E2B__PORTS_DOMAIN=PORTS_DOMAIN,
        )
        for _ in range(INSTANCES)
    ]
    proxy = RoundRobinProxy([instance.base_url for instance in instances])
    proxy.start()
    yield Fleet(instances, proxy)
    proxy.stop()
