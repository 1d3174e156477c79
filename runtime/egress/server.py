"""Running the egress proxy as its own process.

Two ways: ``python -m runtime.egress.server`` is what the service starts and
supervises (the configuration, key included, arrives as one JSON line on stdin,
never on a command line; events leave as JSON lines on stdout; stdin closing
means the service is gone, and the proxy exits with it). ``siesta-runtime
egress-proxy`` runs it apart from any service, configured by the same
``SIESTA_EGRESS__*`` settings (Kubernetes runs it so, as a Deployment).

This module imports only the standard library and the egress rules, so the
proxy starts in a few tens of milliseconds.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
from typing import Any

from runtime.egress.proxy import EgressProxy, Emit, ProxyConfig
from runtime.egress.rules import Allowlist


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
    except OSError as exc:
        emit({"event": "error", "detail": str(exc)})
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
