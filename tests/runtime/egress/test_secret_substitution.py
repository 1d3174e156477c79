"""The egress proxy substituting a secret, over real sockets with `curl` as the client:
the host the secret names gets the value (HTTPS, read through the deployment's
authority, and plain HTTP); other headers, other hosts, other conversations' and
deleted secrets' placeholders go as they are; an unverifiable server gets nothing.
The Docker end to end (a sandbox, its trust store) is tests/security/."""

from __future__ import annotations

import http.server
import ipaddress
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.core.network_rules import Allowlist, NetworkRules, SecretBinding
from runtime.core.records import SealedSecret
from runtime.egress.authority import make_authority
from runtime.egress.authority_pem import AuthorityPem
from runtime.egress.credentials import EgressClaims, sign
from runtime.egress.placeholders import placeholder
from runtime.egress.proxy import ProxyConfig
from runtime.egress.sealing import SecretSealer
from tests.egress_upstream import TlsUpstream, serving_tls
from tests.runtime.egress.test_proxy import RunningProxy

KEY = b"substitution-test-key-" * 2
SECRETS_KEY = "secrets-key-for-the-substitution-test"
VALUE = b"the-real-value-42"


class Rules:
    """The store as the proxy reads it: the conversation ``conv-a`` of ``org-a`` is
    offered ``token``, which may go to ``target.test`` (HTTPS and plain)."""

    def __init__(self, target: int, plain: int) -> None:
        sealed = SecretSealer(SECRETS_KEY).seal("org-a", "token", VALUE)
        hosts = (f"target.test:{target}", f"target.test:{plain}", f"impostor.test:{target}")
        self.secrets = {
            "token": SealedSecret(
                "org-a", "token", sealed, 0.0, 0.0, len(VALUE), hosts, "X-Api-Key"
            )
        }

    def network_rules(self, org: str, conversation: str) -> NetworkRules | None:
        return NetworkRules(secrets=(SecretBinding("token", "TOKEN"),))

    def secret(self, org: str, name: str) -> SealedSecret | None:
        return self.secrets.get(name) if org == "org-a" else None

    def add_egress_refusals(self, *args: Any) -> None:
        pass


class Running(RunningProxy):
    """The proxy of ``test_proxy``, reading ``rules`` as its store (in memory)."""

    def __init__(self, config: ProxyConfig, rules: Rules) -> None:
        super().__init__(config)
        self.proxy.rules._source = rules  # type: ignore[assignment]  # read per request
        assert self.proxy.secrets is not None
        self.proxy.secrets._source = rules  # type: ignore[assignment]


@pytest.fixture(scope="module")
def target() -> Iterator[TlsUpstream]:
    with serving_tls("target.test", "impostor.test") as server:
        yield server


@pytest.fixture(scope="module")
def plain() -> Iterator[tuple[int, list[dict[str, str]]]]:
    """A plain HTTP server keeping every request's headers."""
    seen: list[dict[str, str]] = []

    class Recording(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({name.lower(): value for name, value in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1]), seen
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def authority() -> AuthorityPem:
    return make_authority()


def start(
    target: TlsUpstream, plain_port: int, authority: AuthorityPem, *, upstream_ca: str | None
) -> Running:
    names = ("target.test", "elsewhere.test", "impostor.test")
    config = ProxyConfig(
        key=KEY,
        allow=Allowlist.parse(
            [f"{name}:{port}" for name in names for port in (target.port, plain_port)]
        ),
        port=0,
        hosts=dict.fromkeys(names, "127.0.0.1"),
        allowed_private_networks=(ipaddress.ip_network("127.0.0.0/8"),),
        secrets_key=SECRETS_KEY,
        authority_cert=authority.cert,
        authority_key=authority.key,
        upstream_ca=upstream_ca,
    )
    return Running(config, Rules(target.port, plain_port))


@pytest.fixture
def proxy(
    target: TlsUpstream, plain: tuple[int, list[dict[str, str]]], authority: AuthorityPem
) -> Iterator[Running]:
    running = start(target, plain[0], authority, upstream_ca=target.ca_pem)
    yield running
    running.close()


def curl(
    proxy: Running, url: str, *headers: str, ca: str | None = None, conversation: str = "conv-a"
) -> subprocess.CompletedProcess[str]:
    """``curl`` through the proxy as the conversation; ``ca``: the authority it verifies
    the server's certificate with (PEM), else it checks none (an opaque tunnel's)."""
    user, password = sign(KEY, EgressClaims("org-a", conversation, None, time.time()))
    args = ["curl", "-sS", "-m", "10", "-x", f"http://{user}:{password}@127.0.0.1:{proxy.port}"]
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as file:
        file.write(ca or "")
        file.flush()
        args += ["--cacert", file.name] if ca else ["-k"]
        for header in headers:
            args += ["-H", header]
        return subprocess.run([*args, url], capture_output=True, text=True, timeout=20, check=False)


MARK = placeholder(KEY, "org-a", "conv-a", "token")


def test_https_to_the_secrets_host_gets_the_value_in_its_header_only(
    proxy: Running, target: TlsUpstream, authority: AuthorityPem
) -> None:
    done = curl(
        proxy,
        f"https://target.test:{target.port}/a?{MARK}",
        f"X-Api-Key: key={MARK}",
        f"Authorization: Bearer {MARK}",
        ca=authority.cert,  # the client verifies the proxy's certificate for the host
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok"
    got = target.seen[-1]
    assert got["x-api-key"] == "key=" + VALUE.decode()
    assert got["authorization"] == f"Bearer {MARK}"  # not the header the secret names
    assert any(event["event"] == "intercepted" for event in proxy.events)
    assert VALUE.decode() not in repr(proxy.events)


def test_plain_http_to_the_secrets_host_gets_the_value(
    proxy: Running, plain: tuple[int, list[dict[str, str]]]
) -> None:
    port, seen = plain
    done = curl(proxy, f"http://target.test:{port}/", f"X-Api-Key: {MARK}")
    assert done.returncode == 0, done.stderr
    assert seen[-1]["x-api-key"] == VALUE.decode()


def test_another_host_or_conversation_gets_the_placeholder(
    proxy: Running, target: TlsUpstream, plain: tuple[int, list[dict[str, str]]]
) -> None:
    port, seen = plain
    done = curl(proxy, f"http://elsewhere.test:{port}/", f"X-Api-Key: {MARK}")
    assert done.returncode == 0, done.stderr
    assert seen[-1]["x-api-key"] == MARK
    done = curl(proxy, f"http://target.test:{port}/", f"X-Api-Key: {MARK}", conversation="conv-b")
    assert done.returncode == 0, done.stderr
    assert seen[-1]["x-api-key"] == MARK  # conv-b's own placeholder is another
    # Another host over HTTPS: an opaque tunnel, the real server's own certificate.
    done = curl(
        proxy, f"https://elsewhere.test:{target.port}/", f"X-Api-Key: {MARK}", ca=target.ca_pem
    )
    assert done.returncode != 0  # the certificate names target.test: not read, not replaced
    assert "intercepted" not in [event["event"] for event in proxy.events]


def test_a_server_the_proxy_cannot_verify_gets_nothing(
    target: TlsUpstream, plain: tuple[int, list[dict[str, str]]], authority: AuthorityPem
) -> None:
    running = start(target, plain[0], authority, upstream_ca=None)  # the system's only
    try:
        before = len(target.seen)
        done = curl(
            running,
            f"https://target.test:{target.port}/",
            f"X-Api-Key: {MARK}",
            "X-Probe: 1",
            ca=authority.cert,
        )
        assert len(target.seen) == before  # not a byte of the request reached it
        assert "siesta egress proxy" in done.stdout and "did not verify" in done.stdout
        refused = [e for e in running.events if e["event"] == "failed"]
        assert refused and refused[-1]["reason"] == "upstream_tls_failed"
    finally:
        running.close()


def test_a_deleted_secret_is_no_longer_put_in(
    target: TlsUpstream, plain: tuple[int, list[dict[str, str]]], authority: AuthorityPem
) -> None:
    running = start(target, plain[0], authority, upstream_ca=target.ca_pem)
    try:
        rules = running.proxy.rules._source
        assert isinstance(rules, Rules)
        rules.secrets.clear()
        port, seen = plain
        done = curl(running, f"http://target.test:{port}/", f"X-Api-Key: {MARK}")
        assert done.returncode == 0, done.stderr
        assert seen[-1]["x-api-key"] == MARK
    finally:
        running.close()
