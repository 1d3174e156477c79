"""Egress built from the settings: none, a proxy run apart (``proxy_url``), or on
Docker the deployment's sandbox network with its firewall and our proxy process
(which reads revocations at ``store_url``).

Apart from ``runtime.egress.service`` because it reaches into the Docker provider
(its network) and the proxy (and through it the store's backends): only the
composition root (``runtime.wiring``) and the command line import it.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runtime.core.errors import ConfigurationError
from runtime.core.metrics import record_egress_event
from runtime.core.network_rules import Allowlist
from runtime.egress.authority_pem import AuthorityPem
from runtime.egress.proxy import ProxyConfig
from runtime.egress.service import Egress, EgressSetup, ProxiedEgress, egress_key
from runtime.egress.settings import EgressSettings
from runtime.seams.provider_settings import DockerProviderSettings
from runtime.seams.store_settings import RedisStoreSettings, StoreSettings
from runtime.seams.stores import DeploymentStore


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
        self._authority = egress_authority(egress, setup.data_dir)
        client = docker.DockerClient(base_url=provider.base_url) if provider.base_url else None
        self._client = client or docker.from_env()
        sandbox_network = SandboxNetwork(self._client.api, deployment_id, setup.extra_labels)
        gateway = sandbox_network.ensure()
        self._proxy: ProxyProcess | None = None
        if start_proxy:
            HostFirewall(deployment_id).allow_only(egress.proxy_port)
            config = proxy_config(
                egress,
                key,
                host=gateway,
                port=egress.proxy_port,
                store_url=setup.store_url,
                authority=self._authority,
            )
            self._proxy = ProxyProcess(config, record_egress_event)
            self._proxy.start()
        self.network = sandbox_network.name
        super().__init__(
            Allowlist.parse(egress.allow),
            key,
            f"{gateway}:{egress.proxy_port}",
            trust_pem=self._authority.cert if self._authority is not None else None,
        )

    def close(self) -> None:
        # The network and its firewall stay: sandboxes on them outlive this process.
        if self._proxy is not None:
            self._proxy.close()
        self._client.close()


def proxy_config(
    egress: EgressSettings,
    key: bytes,
    *,
    host: str,
    port: int,
    store_url: str,
    authority: AuthorityPem | None = None,
) -> ProxyConfig:
    """``authority``: where the proxy substitutes secrets (``secrets_key`` set)."""
    secrets_key = egress.secrets_key.get_secret_value() if egress.secrets_key else None
    upstream_ca = egress.upstream_ca_file.read_text() if egress.upstream_ca_file else None
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
        secrets_key=secrets_key if authority is not None else None,
        authority_cert=authority.cert if authority is not None else None,
        authority_key=authority.key if authority is not None else None,
        upstream_ca=upstream_ca,
    )


def egress_authority(egress: EgressSettings, data_dir: Path) -> AuthorityPem | None:
    """The authority sandboxes trust, where secrets are substituted; ``None``: none."""
    if not egress.substitutes_secrets:
        return None
    from runtime.egress.authority import load_or_make

    return load_or_make(egress.ca_cert_file, egress.ca_key_file, data_dir)


def store_url(store: StoreSettings, sqlite_path: Path) -> str:
    """Where the proxy reads revocations: the service's own store."""
    if isinstance(store, RedisStoreSettings):
        return store.url
    return f"sqlite://{sqlite_path.resolve()}"


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
        if egress.substitutes_secrets and egress.ca_cert_file is None:
            msg = (
                "secrets with a proxy run apart need its authority: set "
                "SIESTA_EGRESS__CA_CERT_FILE and SIESTA_EGRESS__CA_KEY_FILE for both"
            )
            raise ConfigurationError(msg)
        authority = egress_authority(egress, setup.data_dir)
        trust = authority.cert if authority is not None else None
        return ProxiedEgress(allow, key, _resolved_address(egress.proxy_url), trust_pem=trust)
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
