"""The egress proxy over real sockets: what it carries, what it refuses and why."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from runtime.core.network_rules import Allowlist, NetworkRules
from runtime.egress.credentials import EgressClaims, sign
from runtime.egress.proxy import EgressProxy, ProxyConfig

KEY = b"test-key-" * 4
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


class RunningProxy:
    def __init__(self, config: ProxyConfig) -> None:
        self.events: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self.proxy = EgressProxy(config, self.events.append)
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self.port = asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(5)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        while self._loop.is_running():
            threading.Event().wait(0.01)
        self._loop.close()

    def exchange(self, head: str, *, claims: EgressClaims | None = None) -> tuple[int, str, str]:
        """Sends one request head; returns (status, response head, body)."""
        lines = head.rstrip("\r\n").split("\r\n")
        if claims is not None:
            token = base64.b64encode(":".join(sign(KEY, claims)).encode()).decode()
            lines.append(f"Proxy-Authorization: Basic {token}")
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            return _response(conn)


def _response(conn: socket.socket) -> tuple[int, str, str]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    if not data:
        msg = "the proxy closed the connection without an answer"
        raise ConnectionAbortedError(msg)
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        while chunk := conn.recv(65536):
            body += chunk
    except (TimeoutError, ConnectionResetError):  # a refusal may close before we read all
        pass
    status = int(head.split(b" ", 2)[1])
    return status, head.decode(), body.decode()


CLAIMS = EgressClaims("org-a", "conv-a")


@pytest.fixture
def proxy(origin: int) -> Iterator[RunningProxy]:
    config = ProxyConfig(
        key=KEY,
        allow=Allowlist.parse(
            [f"origin.test:{origin}", f"*.pinned.test:{origin}", "metadata.test", "closed.test:1"]
        ),
        port=0,
        hosts={
            "origin.test": "127.0.0.1",
            "a.pinned.test": "127.0.0.1",
            "private.pinned.test": "10.0.0.7",
            "metadata.test": "169.254.169.254",
            "closed.test": "127.0.0.1",
        },
        allowed_private_networks=LOOPBACK,
        connect_timeout_seconds=2,
        idle_timeout_seconds=2,
    )
    running = RunningProxy(config)
    yield running
    running.close()


def test_plain_http_reaches_the_named_site_only(proxy: RunningProxy, origin: int) -> None:
    status, _, body = proxy.exchange(
        f"GET http://origin.test:{origin}/a?b=1 HTTP/1.1\r\nHost: other.site", claims=CLAIMS
    )
    assert status == 200
    # Origin-form target; the Host the URL names, not the one sent; no credentials passed on.
    assert body == f"path=/a?b=1 host=origin.test:{origin} auth=None local=127.0.0.1"
    assert proxy.events[-1] | {"address": "127.0.0.1"} == {
        "event": "allowed",
        "org": "org-a",
        "conversation": "conv-a",
        "host": "origin.test",
        "port": origin,
        "address": "127.0.0.1",
    }


def test_connect_tunnels_to_an_allowed_host(proxy: RunningProxy, origin: int) -> None:
    token = base64.b64encode(":".join(sign(KEY, CLAIMS)).encode()).decode()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn:
        conn.sendall(
            f"CONNECT a.pinned.test:{origin} HTTP/1.1\r\n"
            f"Proxy-Authorization: Basic {token}\r\n\r\n".encode()
        )
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET /through HTTP/1.1\r\nHost: a.pinned.test\r\nConnection: close\r\n\r\n")
        status, _, body = _response(conn)
    assert status == 200 and body.startswith("path=/through host=a.pinned.test")


@pytest.mark.parametrize(
    ("request_head", "status", "reason", "says"),
    [
        (
            "GET http://elsewhere.test/ HTTP/1.1",
            403,
            "host_not_allowed",
            "not in the egress allowlist",
        ),
        ("CONNECT elsewhere.test:443 HTTP/1.1", 403, "host_not_allowed", "elsewhere.test:443"),
        ("CONNECT 127.0.0.1:{origin} HTTP/1.1", 403, "ip_literal", "addresses are refused"),
        ("CONNECT [::1]:443 HTTP/1.1", 403, "ip_literal", "addresses are refused"),
        ("GET http://2130706433:{origin}/ HTTP/1.1", 403, "ip_literal", "usual form"),
        (
            "CONNECT private.pinned.test:{origin} HTTP/1.1",
            403,
            "address_not_allowed",
            "a private address",
        ),
        ("GET http://metadata.test/latest/ HTTP/1.1", 403, "address_not_allowed", "cloud metadata"),
        ("CONNECT origin.test:22 HTTP/1.1", 403, "host_not_allowed", "origin.test:22"),
        ("GET https://origin.test:{origin}/ HTTP/1.1", 400, "bad_request", "use CONNECT"),
        ("CONNECT closed.test:1 HTTP/1.1", 502, "connect_failed", "closed.test:1"),
    ],
)
def test_refusals_say_why(
    proxy: RunningProxy, origin: int, request_head: str, status: int, reason: str, says: str
) -> None:
    got, head, body = proxy.exchange(request_head.format(origin=origin), claims=CLAIMS)
    assert (got, f"X-Siesta-Egress-Refusal: {reason}" in head) == (status, True)
    assert says in body
    event = proxy.events[-1]
    assert event["event"] == ("refused" if status == 403 else "failed")
    assert event["reason"] == reason
    if status != 400:  # a request that could not be read is nobody's
        assert (event["org"], event["conversation"]) == ("org-a", "conv-a")


def test_a_private_name_is_refused_even_when_allowed_by_name(origin: int) -> None:
    """Without the operator's loopback range, a listed name that resolves to loopback is out."""
    config = ProxyConfig(
        key=KEY,
        allow=Allowlist.parse([f"origin.test:{origin}"]),
        port=0,
        hosts={"origin.test": "127.0.0.1"},
    )
    running = RunningProxy(config)
    try:
        status, _, body = running.exchange(
            f"GET http://origin.test:{origin}/ HTTP/1.1", claims=CLAIMS
        )
    finally:
        running.close()
    assert status == 403 and "resolves to 127.0.0.1, a loopback address" in body


@pytest.mark.parametrize("claims", [None, "forged"])
def test_requests_without_valid_credentials_are_refused(
    proxy: RunningProxy, origin: int, claims: str | None
) -> None:
    head = f"GET http://origin.test:{origin}/ HTTP/1.1"
    if claims == "forged":
        forged = base64.b64encode(f"{sign(KEY, CLAIMS)[0]}:{'0' * 64}".encode()).decode()
        head += f"\r\nProxy-Authorization: Basic {forged}"
    status, response_head, _ = proxy.exchange(head)
    assert status == 407 and "Proxy-Authenticate: Basic" in response_head
    assert proxy.events[-1]["reason"] == "unauthenticated"


def test_the_agents_narrowing_travels_in_the_credentials(proxy: RunningProxy, origin: int) -> None:
    narrowed = replace(CLAIMS, narrowed_to=(f"a.pinned.test:{origin}",))
    status, _, body = proxy.exchange(f"GET http://origin.test:{origin}/ HTTP/1.1", claims=narrowed)
    assert status == 403 and "narrowed by the agent" in body
    status, _, _ = proxy.exchange(f"GET http://a.pinned.test:{origin}/ HTTP/1.1", claims=narrowed)
    assert status == 200


def test_limits_on_heads_and_connections(origin: int) -> None:
    config = ProxyConfig(
        key=KEY, allow=Allowlist(), port=0, max_connections=2, max_header_bytes=1024
    )
    running = RunningProxy(config)
    try:
        status, _, body = running.exchange("GET http://x.test/ HTTP/1.1\r\nX-Big: " + "a" * 2000)
        assert status == 431 and "over 1024 bytes" in body
        idle = [socket.create_connection(("127.0.0.1", running.port)) for _ in range(2)]
        try:
            # Both slots are taken by connections that have sent nothing yet.
            assert wait_for(lambda: running.exchange("GET http://x.test/ HTTP/1.1")[0] == 503)
        finally:
            for conn in idle:
                conn.close()
    finally:
        running.close()


def wait_for(predicate: Any, attempts: int = 50) -> bool:
    import time

    for _ in range(attempts):
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_one_sandbox_cannot_take_every_connection(origin: int) -> None:
    config = ProxyConfig(
        key=KEY,
        allow=Allowlist.parse([f"origin.test:{origin}"]),
        port=0,
        hosts={"origin.test": "127.0.0.1"},
        allowed_private_networks=LOOPBACK,
        max_connections_per_conversation=2,
    )
    running = RunningProxy(config)
    token = base64.b64encode(":".join(sign(KEY, CLAIMS)).encode()).decode()
    tunnels = []
    try:
        for _ in range(2):  # two tunnels held open by one conversation
            conn = socket.create_connection(("127.0.0.1", running.port), timeout=5)
            conn.sendall(
                f"CONNECT origin.test:{origin} HTTP/1.1\r\n"
                f"Proxy-Authorization: Basic {token}\r\n\r\n".encode()
            )
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
            tunnels.append(conn)
        status, _, body = running.exchange(
            f"GET http://origin.test:{origin}/ HTTP/1.1", claims=CLAIMS
        )
        assert status == 503 and "already has 2 connections open" in body
        other = EgressClaims("org-a", "conv-b")  # another sandbox is still served
        assert (
            running.exchange(f"GET http://origin.test:{origin}/ HTTP/1.1", claims=other)[0] == 200
        )
        tunnels.pop().close()
        assert wait_for(
            lambda: (
                running.exchange(f"GET http://origin.test:{origin}/ HTTP/1.1", claims=CLAIMS)[0]
                == 200
            )
        )
    finally:
        for conn in tunnels:
            conn.close()
        running.close()


class OwnRules:
    """A store as the proxy reads it, holding one conversation's own network rules."""

    def __init__(self, rules: NetworkRules) -> None:
        self.rules = rules

    def network_rules(self, org: str, conversation: str) -> NetworkRules | None:
        return self.rules

    def add_egress_refusals(self, *args: Any) -> None:
        pass


def test_addresses_and_ranges_in_the_lists(origin: int) -> None:
    """An address the deployment lists is reachable as a literal, and a name is too
    when every address it resolves to is listed; a sandbox's denied range catches the
    names that resolve into it, unless its E2B ``allowOut`` exempts them."""
    config = ProxyConfig(
        key=KEY,
        allow=Allowlist.parse([f"127.0.0.1:{origin}", f"listed.test:{origin}"]),
        port=0,
        hosts={"listed.test": "127.0.0.1", "unlisted.test": "127.0.0.1", "far.test": "127.0.0.2"},
        allowed_private_networks=LOOPBACK,
        network_rules_cache_seconds=1e-6,  # each request reads the rules set below
    )
    running = RunningProxy(config)
    try:

        def get(host: str) -> tuple[int, str]:
            status, head, _ = running.exchange(
                f"GET http://{host}:{origin}/ HTTP/1.1", claims=CLAIMS
            )
            return status, head

        assert get("127.0.0.1")[0] == 200
        assert get("unlisted.test")[0] == 200  # resolves to a listed address
        status, head = get("127.0.0.2")
        assert status == 403 and "X-Siesta-Egress-Refusal: ip_literal" in head
        status, head = get("far.test")
        assert status == 403 and "X-Siesta-Egress-Refusal: host_not_allowed" in head

        own = OwnRules(NetworkRules(deny=("127.0.0.0/8",)))
        running.proxy.rules._source = own  # type: ignore[assignment]  # read per request
        for host in ("127.0.0.1", "listed.test", "unlisted.test"):
            status, head = get(host)
            assert status == 403 and "X-Siesta-Egress-Refusal: sandbox_deny" in head, host

        own.rules = NetworkRules(deny=("127.0.0.0/8",), exempt=("listed.test:" + str(origin),))
        assert get("listed.test")[0] == 200  # allow wins over deny, as on E2B
        assert get("unlisted.test")[0] == 403

        own.rules = NetworkRules(allow=(f"127.0.0.1:{origin}",))
        assert get("127.0.0.1")[0] == 200
        assert get("unlisted.test")[0] == 200  # by its address
        status, head = get("listed.test")
        assert status == 200  # listed.test resolves to 127.0.0.1 too
    finally:
        running.close()
