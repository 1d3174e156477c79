"""Running the egress proxy as its own process.

Two ways: ``python -m runtime.egress.server`` is what the service starts and
supervises (the configuration, key included, arrives as one JSON line on stdin,
never on a command line; events leave as JSON lines on stdout; stdin closing
means the service is gone, and the proxy exits with it). ``siesta-runtime
egress-proxy`` runs it apart from any service, configured by the same
``SIESTA_EGRESS__*`` settings (Kubernetes runs it so, as a Deployment).

Either way it reads revoked credentials from the service's store (its URL, which
may hold a password, is in that JSON line or the settings), and does not listen
until it has read them.

This module imports only the standard library, the egress rules and the store's
revocations (its backend when it is opened), so the proxy starts in well under a
second.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
from typing import Any

from runtime.core.network_rules import Allowlist
from runtime.egress.proxy import EgressProxy, Emit, ProxyConfig
from runtime.egress.revocations import RevocationsUnavailable


def config_to_json(config: ProxyConfig) -> str:
    return json.dumps(
        {
            "key": config.key.hex(),
            "allow": [str(rule) for rule in config.allow.rules],
            "host": config.host,
            "port": config.port,
            "hosts": config.hosts,
            "allowed_private_networks": [str(net) for net in config.allowed_private_networks],
            "connect_timeout_seconds": config.connect_timeout_seconds,
            "idle_timeout_seconds": config.idle_timeout_seconds,
            "head_timeout_seconds": config.head_timeout_seconds,
            "max_connections": config.max_connections,
            "max_connections_per_conversation": config.max_connections_per_conversation,
            "max_header_bytes": config.max_header_bytes,
            "store_url": config.store_url,
            "revocation_retention_seconds": config.revocation_retention_seconds,
            "revocation_poll_seconds": config.revocation_poll_seconds,
            "network_rules_cache_seconds": config.network_rules_cache_seconds,
            "refusal_retention_seconds": config.refusal_retention_seconds,
            "secrets_key": config.secrets_key,
            "authority_cert": config.authority_cert,
            "authority_key": config.authority_key,
            "upstream_ca": config.upstream_ca,
        }
    )


def config_from_json(text: str) -> ProxyConfig:
    data: dict[str, Any] = json.loads(text)
    return ProxyConfig(
        key=bytes.fromhex(data["key"]),
        allow=Allowlist.parse(data["allow"]),
        host=data["host"],
        port=int(data["port"]),
        hosts={str(k): str(v) for k, v in data["hosts"].items()},
        allowed_private_networks=tuple(
            ipaddress.ip_network(net) for net in data["allowed_private_networks"]
        ),
        connect_timeout_seconds=float(data["connect_timeout_seconds"]),
        idle_timeout_seconds=float(data["idle_timeout_seconds"]),
        head_timeout_seconds=float(data["head_timeout_seconds"]),
        max_connections=int(data["max_connections"]),
        max_connections_per_conversation=int(data["max_connections_per_conversation"]),
        max_header_bytes=int(data["max_header_bytes"]),
        store_url=data["store_url"],
        revocation_retention_seconds=float(data["revocation_retention_seconds"]),
        revocation_poll_seconds=float(data["revocation_poll_seconds"]),
        network_rules_cache_seconds=float(data["network_rules_cache_seconds"]),
        refusal_retention_seconds=float(data["refusal_retention_seconds"]),
        secrets_key=data.get("secrets_key"),
        authority_cert=data.get("authority_cert"),
        authority_key=data.get("authority_key"),
        upstream_ca=data.get("upstream_ca"),
    )


def json_lines(stream: Any = None) -> Emit:
    out = stream or sys.stdout

    def emit(event: dict[str, Any]) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    return emit


async def serve(config: ProxyConfig, emit: Emit, until: asyncio.Future[None]) -> None:
    proxy = EgressProxy(config, emit)
    try:
        port = await proxy.start()
    except (OSError, RevocationsUnavailable) as exc:
        emit({"event": "error", "detail": str(exc)})
        await proxy.close()
        raise SystemExit(1) from exc
    emit({"event": "ready", "host": config.host, "port": port})
    try:
        await until
    finally:
        await proxy.close()


async def _supervised() -> None:
    loop = asyncio.get_running_loop()
    config = config_from_json(await loop.run_in_executor(None, sys.stdin.readline))
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)  # returns at EOF
    await serve(config, json_lines(), asyncio.ensure_future(stdin_closed))


if __name__ == "__main__":
    asyncio.run(_supervised())
