"""Three service instances on one Redis and one Docker engine, behind a round-robin
proxy (``roundrobin.py``): every request lands on the next instance."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import httpx
import pytest

from tests.fleet.roundrobin import RoundRobinProxy
from tests.helpers import TOKEN, ServiceProcess, StartService, respawn, tokens_setting
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
    respawned: list[ServiceProcess] = field(default_factory=list)
    """Instances started again by ``stop``: stopped with the fleet."""

    @property
    def url(self) -> str:
        return self.proxy.url

    def client(self, timeout: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def stop(self, index: int, how: signal.Signals, within: float) -> float:
        """Stop instance ``index`` with ``how`` (SIGKILL, or SIGTERM: it drains), start
        it again on its data behind the proxy; how many seconds it took to exit (at
        most ``within``: past it, it is killed and the test fails)."""
        stopping = self.instances[index]
        began = time.monotonic()
        stopping.process.send_signal(how)
        try:
            stopping.process.wait(within)
        finally:
            took = time.monotonic() - began
            if stopping.process.poll() is None:
                stopping.kill()
            stopping.client.close()
        started = respawn(stopping)
        self.respawned.append(started)
        self.instances[index] = started
        self.proxy.replace(index, started.base_url)
        assert took < within, f"instance {index} took {took:.1f} s to stop on {how.name}"
        return took

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
    fleet = Fleet(instances, proxy)
    yield fleet
    proxy.stop()
    for started in fleet.respawned:
        with contextlib.suppress(Exception):
            started.stop()
