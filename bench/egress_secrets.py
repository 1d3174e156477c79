"""What substituting a secret costs an HTTPS request through the egress proxy, in this
process, against a TLS server on loopback: a request to a host the conversation is
offered a secret for (the proxy ends the client's TLS with a certificate of the
deployment's authority, opens its own to the server, rewrites the head) beside the same
request to a host it is not (an opaque CONNECT tunnel: one TLS session, end to end).
Each request is a new connection, as an intercepted one carries one request.

    python -m bench.egress_secrets [--quick]      (also a part of ``make bench``)

Target (ours): the intercepted request at most 2x the tunnelled one's p50 (it adds one
TLS handshake and the certificate lookup; the first request to a host also signs its
certificate, which the p50 leaves out).
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import ipaddress
import ssl
import sys
import threading
import time
from typing import Any

from bench.common import median, percentile
from bench.measures import Figure
from runtime.core.network_rules import Allowlist, NetworkRules, SecretBinding
from runtime.core.records import SealedSecret
from runtime.egress.authority import make_authority
from runtime.egress.credentials import EgressClaims, sign
from runtime.egress.placeholders import placeholder
from runtime.egress.proxy import EgressProxy, ProxyConfig
from runtime.egress.sealing import SecretSealer
from tests.egress_upstream import serving_tls

KEY = b"bench-egress-secrets-key-0123456789"
SECRETS_KEY = "bench-secrets-key-0123456789-abcdef"


class _Store:
    def __init__(self, secret: SealedSecret) -> None:
        self._secret = secret

    def network_rules(self, org: str, conversation: str) -> NetworkRules:
        return NetworkRules(secrets=(SecretBinding("token", "TOKEN"),))

    def secret(self, org: str, name: str) -> SealedSecret:
        return self._secret

    def add_egress_refusals(self, *args: Any) -> None:
        pass


def _get(proxy_port: int, host: str, port: int, context: ssl.SSLContext, auth: str) -> None:
    conn = http.client.HTTPSConnection("127.0.0.1", proxy_port, context=context, timeout=10)
    conn.set_tunnel(host, port, headers={"Proxy-Authorization": auth})
    conn.request("GET", "/", headers={"X-Api-Key": "placeholder"})
    response = conn.getresponse()
    assert response.status == 200, response.status
    response.read()
    conn.close()


def measure(n: int = 200) -> list[Figure]:
    with serving_tls("secret.test", "tunnel.test") as upstream:
        authority = make_authority()
        sealed = SecretSealer(SECRETS_KEY).seal("org", "token", b"value")
        store = _Store(
            SealedSecret(
                "org", "token", sealed, 0, 0, 5, (f"secret.test:{upstream.port}",), "X-Api-Key"
            )
        )
        config = ProxyConfig(
            key=KEY,
            allow=Allowlist.parse([f"{h}:{upstream.port}" for h in ("secret.test", "tunnel.test")]),
            port=0,
            hosts={"secret.test": "127.0.0.1", "tunnel.test": "127.0.0.1"},
            allowed_private_networks=(ipaddress.ip_network("127.0.0.0/8"),),
            secrets_key=SECRETS_KEY,
            authority_cert=authority.cert,
            authority_key=authority.key,
            upstream_ca=upstream.ca_pem,
        )
        loop = asyncio.new_event_loop()
        proxy = EgressProxy(config, lambda event: None)
        proxy.rules._source = store  # type: ignore[assignment]  # in memory, no store
        assert proxy.secrets is not None
        proxy.secrets._source = store  # type: ignore[assignment]
        threading.Thread(target=loop.run_forever, daemon=True).start()
        port = asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(5)
        try:
            user, password = sign(KEY, EgressClaims("org", "conv", None, time.time()))
            auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            context = ssl.create_default_context(cadata=upstream.ca_pem + authority.cert)
            assert placeholder(KEY, "org", "conv", "token")  # what a sandbox would send

            def timed(host: str) -> float:
                started = time.perf_counter()
                _get(port, host, upstream.port, context, auth)
                return (time.perf_counter() - started) * 1000

            for host in ("secret.test", "tunnel.test"):  # certificates signed, caches warm
                timed(host)
            tunnel, intercepted = [], []
            for _ in range(n):  # in turns, so both see the same machine
                tunnel.append(timed("tunnel.test"))
                intercepted.append(timed("secret.test"))
        finally:
            asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
    ours, base = median(intercepted), median(tunnel)
    return [
        Figure(
            "HTTPS request with a secret substituted (proxy reads TLS), p50",
            ours,
            "ms",
            "the same request through an opaque tunnel",
            base,
            "at most 2x the tunnel",
            ours <= 2 * base,
            f"p95 {percentile(intercepted, 0.95):.2f} ms vs {percentile(tunnel, 0.95):.2f} ms",
        )
    ]


def main() -> int:
    for figure in measure(50 if "--quick" in sys.argv else 200):
        ratio = figure.ours / figure.baseline if figure.baseline else 0
        print(
            f"{figure.name}: {figure.ours:.2f} {figure.unit} vs {figure.baseline_name} "
            f"{figure.baseline:.2f} {figure.unit} (x{ratio:.2f}; target {figure.target}: "
            f"{'met' if figure.met else 'missed'}); {figure.note}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
