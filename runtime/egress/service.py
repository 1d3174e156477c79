"""Egress as the rest of the service sees it: a network for sandboxes and the proxy
environment for each command.

With no allowlist (the default) there is nothing to run: sandboxes have no
network and commands get no proxy. With one, the Docker provider puts sandboxes
on the deployment's internal network and this service starts the proxy on its
gateway; elsewhere (Kubernetes) the proxy runs apart at ``proxy_url``. Either proxy
reads the revocations deletions record in the service's store.
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runtime.core.context import CallContext
from runtime.core.errors import ConfigurationError
from runtime.core.metrics import record_egress_event
from runtime.core.network_rules import Allowlist
from runtime.core.records import EgressRevocation
from runtime.egress.credentials import EgressClaims, sign
from runtime.egress.proxy import ProxyConfig
from runtime.egress.settings import EgressSettings
from runtime.providers.settings import DockerProviderSettings, ProviderSettings
from runtime.store.base import DeploymentStore, RevocationStore
from runtime.store.settings import RedisStoreSettings, StoreSettings

log = logging.getLogger(__name__)
NO_PROXY = "localhost,127.0.0.1,::1"
"""Servers a command starts inside its own sandbox are reached directly."""


class Egress:
    """No egress: no network, no proxy environment."""

    network: str | None = None
    """The Docker network sandboxes join (``None``: the provider's default)."""

    def environment(self, ctx: CallContext) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass


class ProxiedEgress(Egress):
    def __init__(self, allow: Allowlist, key: bytes, proxy_address: str) -> None:
        self._allow = allow
        self._key = key
        self._proxy_address = proxy_address

    def environment(self, ctx: CallContext) -> dict[str, str]:
        """``HTTP(S)_PROXY`` (both spellings: curl and apt read the lower case, pip and
        npm either) with this conversation's signed credentials, issued now: ask for
        them under the conversation's lease, so a deletion revokes every earlier one."""
        user, password = sign(self._key, EgressClaims(ctx.org, ctx.conversation, ctx.egress_allow))
        url = f"http://{user}:{password}@{self._proxy_address}"
        env = {"HTTP_PROXY": url, "HTTPS_PROXY": url, "NO_PROXY": NO_PROXY}
        return {**env, **{name.lower(): value for name, value in env.items()}}


class DockerEgress(ProxiedEgress):
    """The deployment's sandbox network, its host firewall, and our proxy process
    (not for one-shot commands: ``start_proxy=False``)."""

    def __init__(
        self, setup: EgressSetup, key: bytes, deployment_id: str, *, start_proxy: bool
    ) -> None:
        import docker

        from runtime.egress.supervisor import ProxyProcess
        from runtime.providers.docker.network import HostFirewall, SandboxNetwork

        egress, provider = setup.egress, setup.provider
        assert isinstance(provider, DockerProviderSettings)
        client = docker.DockerClient(base_url=provider.base_url) if provider.base_url else None
        self._client = client or docker.from_env()
        sandbox_network = SandboxNetwork(self._client.api, deployment_id, setup.extra_labels)
        gateway = sandbox_network.ensure()
        self._proxy: ProxyProcess | None = None
        if start_proxy:
            HostFirewall(deployment_id).allow_only(egress.proxy_port)
            config = proxy_config(
                egress, key, host=gateway, port=egress.proxy_port, store_url=setup.store_url
            )
            self._proxy = ProxyProcess(config, record_egress_event)
            self._proxy.start()
        self.network = sandbox_network.name
        super().__init__(Allowlist.parse(egress.allow), key, f"{gateway}:{egress.proxy_port}")

    def close(self) -> None:
        # The network and its firewall stay: sandboxes on them outlive this process.
        if self._proxy is not None:
            self._proxy.close()
        self._client.close()


def proxy_config(
    egress: EgressSettings, key: bytes, *, host: str, port: int, store_url: str
) -> ProxyConfig:
    return ProxyConfig(
        key=key,
        allow=Allowlist.parse(egress.allow),
        host=host,
        port=port,
        hosts={name: str(address) for name, address in egress.hosts.items()},
        allowed_private_networks=tuple(egress.allowed_private_networks),
        connect_timeout_seconds=egress.connect_timeout_seconds,
        idle_timeout_seconds=egress.idle_timeout_seconds,
        max_connections=egress.max_connections,
        max_connections_per_conversation=egress.max_connections_per_conversation,
        store_url=store_url,
        revocation_retention_seconds=egress.revocation_retention_seconds,
        revocation_poll_seconds=egress.revocation_poll_seconds,
        network_rules_cache_seconds=egress.network_rules_cache_seconds,
        refusal_retention_seconds=egress.refusal_retention_seconds,
    )


def store_url(store: StoreSettings, sqlite_path: Path) -> str:
    """Where the proxy reads revocations: the service's own store."""
    if isinstance(store, RedisStoreSettings):
        return store.url
    return f"sqlite://{sqlite_path.resolve()}"


def revoke_credentials(
    store: RevocationStore, settings: EgressSettings, org: str, conversation: str
) -> None:
    """The conversation's credentials issued until now stop working at every proxy
    within ``revocation_poll_seconds`` (it is being deleted; its lease is held)."""
    revocation = EgressRevocation(org, conversation, time.time())
    store.revoke_egress(revocation, settings.revocation_retention_seconds)


def egress_key(settings: EgressSettings, store: DeploymentStore) -> bytes:
    if settings.key is not None:
        return settings.key.get_secret_value().encode()
    return bytes.fromhex(store.claim_egress_key(secrets.token_hex(32)))


@dataclass(frozen=True)
class EgressSetup:
    """What egress needs to know of the deployment's other settings."""

    egress: EgressSettings
    provider: ProviderSettings
    extra_labels: dict[str, str]
    """The sandboxes' labels (``SIESTA_SANDBOX__EXTRA_LABELS``), for the sandbox network."""
    store_url: str
    """Where the proxy reads revoked credentials (``store_url``)."""


def build_egress(
    setup: EgressSetup, store: DeploymentStore, deployment_id: str, *, start_proxy: bool = True
) -> Egress:
    """What the settings ask for; ``start_proxy=False`` for one-shot commands, which
    need the sandbox network's name but carry no traffic."""
    egress = setup.egress
    if not egress.enabled:
        return Egress()
    key = egress_key(egress, store)
    allow = Allowlist.parse(egress.allow)
    if egress.proxy_url:
        return ProxiedEgress(allow, key, _resolved_address(egress.proxy_url))
    if isinstance(setup.provider, DockerProviderSettings):
        return DockerEgress(setup, key, deployment_id, start_proxy=start_proxy)
    msg = (
        "an egress allowlist needs a proxy: with this provider, run `siesta-runtime "
        "egress-proxy` apart and set SIESTA_EGRESS__PROXY_URL"
    )
    raise ConfigurationError(msg)


def _resolved_address(proxy_url: str) -> str:
    """``ip:port`` of the proxy: resolved here, so sandboxes need no DNS at all."""
    parts = urlsplit(proxy_url if "//" in proxy_url else f"http://{proxy_url}")
    if not parts.hostname:
        msg = f"SIESTA_EGRESS__PROXY_URL {proxy_url!r} names no host"
        raise ConfigurationError(msg)
    port = parts.port or 3128
    try:
        infos: list[Any] = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        msg = f"the egress proxy {parts.hostname} does not resolve: {exc}"
        raise ConfigurationError(msg) from exc
    address = str(infos[0][4][0])
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
