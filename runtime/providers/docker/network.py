"""Docker: the network sandboxes sit on when a deployment allows egress.

One internal bridge network per deployment (``internal``: Docker gives it no
route out and its DNS answers no outside names), with inter-container traffic
off, so sandboxes cannot reach each other. What remains reachable is the host
itself, at the bridge's address: there the egress proxy listens, and a firewall
chain of ours lets a sandbox reach that port and nothing else on the host (no
SSH, no Redis, no service API bound to all addresses).

The firewall needs ``iptables``/``ip6tables`` and root, as Docker itself does;
the engine must run on this host (its bridges are this host's interfaces).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import subprocess
from typing import Any

import docker
import docker.errors

from runtime.core.errors import ConfigurationError
from runtime.providers.base import DEPLOYMENT_LABEL

log = logging.getLogger(__name__)
NETWORK_PURPOSE_LABEL = "siesta.network"


def network_name(deployment_id: str) -> str:
    return f"siesta-sandboxes-{deployment_id}"


def _digest(deployment_id: str) -> str:
    return hashlib.sha256(deployment_id.encode()).hexdigest()[:10]


def bridge_name(deployment_id: str) -> str:
    """The host interface (at most 15 characters), named so our rules can say it."""
    return f"sbx{_digest(deployment_id)}"


def chain_name(deployment_id: str) -> str:
    return f"SIESTA-SBX-{_digest(deployment_id).upper()}"


class SandboxNetwork:
    def __init__(self, api: docker.APIClient, deployment_id: str, labels: dict[str, str]) -> None:
        self._api = api
        self._deployment_id = deployment_id
        self._labels = {
            **labels,
            DEPLOYMENT_LABEL: deployment_id,
            NETWORK_PURPOSE_LABEL: "sandboxes",
        }
        self.name = network_name(deployment_id)

    def ensure(self) -> str:
        """Create the network if missing; returns its gateway (the host's address on it)."""
        try:
            attrs = self._api.inspect_network(self.name)
        except docker.errors.NotFound:
            attrs = self._create()
        configs = (attrs.get("IPAM") or {}).get("Config") or []
        gateway = next((c.get("Gateway") for c in configs if c.get("Gateway")), None)
        if not gateway:
            msg = f"the Docker network {self.name} has no gateway address"
            raise ConfigurationError(msg)
        return str(gateway)

    def _create(self) -> dict[str, Any]:
        try:
            self._api.create_network(
                self.name,
                driver="bridge",
                internal=True,
                check_duplicate=True,
                labels=self._labels,
                options={
                    "com.docker.network.bridge.name": bridge_name(self._deployment_id),
                    "com.docker.network.bridge.enable_icc": "false",
                },
            )
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: another instance made it first
                msg = f"could not create the sandbox network {self.name}: {exc.explanation}"
                raise ConfigurationError(msg) from exc
        result: dict[str, Any] = self._api.inspect_network(self.name)
        return result

    def remove(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self._api.remove_network(self.name)


class HostFirewall:
    """A chain that lets the sandbox bridge reach one TCP port of the host, no more."""

    def __init__(self, deployment_id: str) -> None:
        self._chain = chain_name(deployment_id)
        self._bridge = bridge_name(deployment_id)

    def allow_only(self, port: int) -> None:
        v4 = [["-p", "tcp", "--dport", str(port), "-j", "ACCEPT"], ["-j", "DROP"]]
        self._install("iptables", v4)
        self._install("ip6tables", [["-j", "DROP"]])  # the proxy listens on IPv4 only

    def _install(self, tool: str, rules: list[list[str]]) -> None:
        expected = [f"-A {self._chain} {' '.join(rule)}" for rule in rules]
        current = _run(tool, "-S", self._chain, check=False)
        if current is None:
            _run(tool, "-N", self._chain)
        if current is None or current.splitlines()[1:] != expected:
            _run(tool, "-F", self._chain)
            for rule in rules:
                _run(tool, "-A", self._chain, *rule)
        jump = ["INPUT", "-i", self._bridge, "-j", self._chain]
        if _run(tool, "-C", *jump, check=False) is None:
            _run(tool, "-I", *jump)

    def remove(self) -> None:
        for tool in ("iptables", "ip6tables"):
            while _run(tool, "-D", "INPUT", "-i", self._bridge, "-j", self._chain, check=False):
                pass
            if _run(tool, "-F", self._chain, check=False) is not None:
                _run(tool, "-X", self._chain, check=False)


def _run(tool: str, *args: str, check: bool = True) -> str | None:
    """The command's output; ``None`` when it failed and ``check`` is off."""
    path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if path is None:
        msg = f"egress needs {tool} (apt-get install iptables) to fence sandboxes off the host"
        raise ConfigurationError(msg)
    done = subprocess.run([path, "-w", *args], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return done.stdout or "ok"
    if check:
        msg = (
            f"egress could not set up the host firewall ({tool} {' '.join(args)}: "
            f"{done.stderr.strip()}); it needs root, like the Docker engine"
        )
        raise ConfigurationError(msg)
    return None


def remove_sandbox_network(base_url: str | None, deployment_id: str) -> None:
    """The deployment's sandbox network and firewall chain, once no sandbox is on it."""
    client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
    try:
        SandboxNetwork(client.api, deployment_id, {}).remove()
    except docker.errors.APIError as exc:
        log.warning("the sandbox network stays: %s", exc.explanation)
        return
    finally:
        client.close()
    with contextlib.suppress(ConfigurationError):  # no iptables: no chain of ours either
        HostFirewall(deployment_id).remove()
