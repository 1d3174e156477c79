"""E2B's network options through the stock ``e2b`` SDK, on a service with egress on:
``allow_internet_access=False``, ``network`` allow/deny lists at create and
``update_network`` on a running sandbox, and what cannot be honoured refused."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from e2b import Sandbox, SandboxException
from e2b.sandbox.network import ALL_TRAFFIC

from tests.e2b.conftest import ORG_A, TOKEN_A, E2bService
from tests.helpers import ServiceProcess, StartService, headers, tokens_setting, wait_until

pytestmark = [pytest.mark.docker]


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    """An HTTP server on this host's loopback (the proxy runs on the host)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def e2b(start_service: StartService, upstream: int) -> E2bService:
    service: ServiceProcess = start_service(
        "docker",
        SIESTA_TOKENS=tokens_setting(("e2b-a", TOKEN_A, ["sandbox"], ORG_A)),
        SIESTA_EGRESS__ALLOW=f"one.test:{upstream},two.test:{upstream}",
        SIESTA_EGRESS__HOSTS=json.dumps({"one.test": "127.0.0.1", "two.test": "127.0.0.1"}),
        SIESTA_EGRESS__ALLOWED_PRIVATE_NETWORKS='["127.0.0.0/8"]',
        SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS="0.5",
    )
    return E2bService(service)


def statuses(sandbox: Sandbox, port: int) -> str:
    """``one.test`` and ``two.test`` fetched: each one's HTTP status (403: refused)."""
    fetch = "curl -sS -m 20 -o /dev/null -w '{name} status=%{{http_code}}\\n' http://{name}.test:{port}/"
    command = "; ".join(fetch.format(name=name, port=port) for name in ("one", "two"))
    return sandbox.commands.run(command + "; true").stdout


def applied(sandbox: Sandbox, port: int, expected: str) -> str:
    """The statuses once ``expected`` is among them (rules reach the proxy within its
    cache period)."""
    seen = [""]

    def fetched() -> bool:
        seen[0] = statuses(sandbox, port)
        return expected in seen[0]

    wait_until(fetched, timeout=15)
    return seen[0]


def test_no_internet_access_then_one_host_on_the_running_sandbox(
    e2b: E2bService, upstream: int
) -> None:
    sandbox = Sandbox.create("base", allow_internet_access=False, **e2b.options())
    try:
        off = statuses(sandbox, upstream)
        assert "one status=403" in off and "two status=403" in off, off

        sandbox.update_network({"allow_out": [f"one.test:{upstream}"], "deny_out": [ALL_TRAFFIC]})
        only_one = applied(sandbox, upstream, "one status=200")
        assert "two status=403" in only_one, only_one

        # The same conversation through /v1 (the E2B sandbox is one): its rules and
        # the refusals its sandbox met.
        answer = e2b.service.client.get(
            f"/v1/conversations/{sandbox.sandbox_id}/sandbox/network", headers=headers(ORG_A)
        ).json()
        assert answer["allow"] == [f"one.test:{upstream}"] and answer["internet"] is True
        assert wait_until(
            lambda: (
                e2b.service.client.get(
                    f"/v1/conversations/{sandbox.sandbox_id}/sandbox/network",
                    headers=headers(ORG_A),
                ).json()["refusals"]
                is not None
            )
        )
    finally:
        sandbox.kill()


def test_denied_hosts_at_create(e2b: E2bService, upstream: int) -> None:
    sandbox = Sandbox.create(
        "base", network={"deny_out": [f"two.test:{upstream}"]}, **e2b.options()
    )
    try:
        denied = statuses(sandbox, upstream)
        assert "one status=200" in denied and "two status=403" in denied, denied
    finally:
        sandbox.kill()


@pytest.mark.parametrize(
    ("network", "named"),
    [
        ({"allow_out": ["10.0.0.0/8"], "deny_out": [ALL_TRAFFIC]}, "10.0.0.0/8"),
        ({"deny_out": ["1.1.1.1"]}, "1.1.1.1"),
        ({"allow_out": ["example.com"], "deny_out": [ALL_TRAFFIC]}, "example.com"),
    ],
)
def test_what_cannot_be_honoured_is_refused_before_a_sandbox_is_made(
    e2b: E2bService, network: dict[str, Any], named: str
) -> None:
    before = len(Sandbox.list(**e2b.options()).next_items())
    # The SDK raises a 400 of the create call as SandboxException("400: <message>").
    with pytest.raises(SandboxException, match=f"400: {re.escape(named)}"):
        Sandbox.create("base", network=network, **e2b.options())  # type: ignore[arg-type]
    assert len(Sandbox.list(**e2b.options()).next_items()) == before
