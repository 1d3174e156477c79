"""E2B's network options through the stock ``e2b`` SDK, on a service with egress on:
``allow_internet_access=False``, ``network`` allow/deny lists at create and
``update_network`` on a running sandbox, and what cannot be honoured refused."""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from e2b import Sandbox, SandboxException
from e2b.sandbox.network import ALL_TRAFFIC

from tests.e2b.conftest import ORG_A, TOKEN_A, E2bService
from tests.egress_upstream import egress_to
from tests.helpers import ServiceProcess, StartService, headers, tokens_setting, wait_until

pytestmark = [pytest.mark.docker]

DOMAIN = "ports.network.test"


@pytest.fixture(scope="module")
def e2b(start_service: StartService, upstream: int) -> E2bService:
    service: ServiceProcess = start_service(
        "docker",
        SIESTA_TOKENS=tokens_setting(("e2b-a", TOKEN_A, ["sandbox"], ORG_A)),
        **egress_to(upstream, "one.test", "two.test"),
        SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS="0.5",
        SIESTA_E2B__PORTS_DOMAIN=DOMAIN,
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


def test_a_denied_range_catches_names_into_it_unless_allowed(
    e2b: E2bService, upstream: int
) -> None:
    """Both names resolve to 127.0.0.1: the denied range refuses two.test, and one.test,
    listed in allow_out, passes (E2B's precedence: allow over deny)."""
    network = {"deny_out": ["127.0.0.0/8"], "allow_out": [f"one.test:{upstream}"]}
    sandbox = Sandbox.create("base", network=network, **e2b.options())  # type: ignore[arg-type]
    try:
        seen = statuses(sandbox, upstream)
        assert "one status=200" in seen and "two status=403" in seen, seen
    finally:
        sandbox.kill()


@pytest.mark.parametrize(
    ("network", "named"),
    [
        ({"allow_out": ["10.0.0.0/8"], "deny_out": [ALL_TRAFFIC]}, "10.0.0.0/8"),
        ({"deny_out": ["1.1.1.1/33"]}, "1.1.1.1/33"),  # no such range
        ({"allow_out": ["example.com"], "deny_out": [ALL_TRAFFIC]}, "example.com"),
    ],
)
def test_what_cannot_be_honoured_is_refused_before_a_sandbox_is_made(
    e2b: E2bService, network: dict[str, Any], named: str
) -> None:
    before = len(Sandbox.list(**e2b.options()).next_items())
    # The SDK raises a 400 of the create call as SandboxException("400: <message>").
    with pytest.raises(SandboxException, match=f"400: '?{re.escape(named)}"):
        Sandbox.create("base", network=network, **e2b.options())  # type: ignore[arg-type]
    assert len(Sandbox.list(**e2b.options()).next_items()) == before


def test_a_fork_of_a_private_sandbox_without_internet_is_private_without_internet(
    e2b: E2bService, upstream: int
) -> None:
    sandbox = Sandbox.create(
        "base",
        allow_internet_access=False,
        network={"allow_public_traffic": False},
        **e2b.options(),
    )
    try:
        # Rules and privacy were stored before the sandbox was made: its first command obeys.
        off = statuses(sandbox, upstream)
        assert "one status=403" in off and "two status=403" in off, off
        forks = sandbox.fork(count=1)
        fork = forks[0]
        assert isinstance(fork, Sandbox), fork
        try:
            off = statuses(fork, upstream)
            assert "one status=403" in off and "two status=403" in off, off
            token = fork.traffic_access_token
            assert token and token != sandbox.traffic_access_token

            def port_answer(**sent: str) -> httpx.Response:
                host = {"Host": fork.get_host(8000)}
                return httpx.get(e2b.service.base_url, headers={**host, **sent}, timeout=60)

            refused = port_answer()
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["code"] == "traffic_token_refused"
            let_in = port_answer(**{"e2b-traffic-access-token": token})
            assert let_in.json()["error"]["code"] == "port_not_listening"  # past the token
        finally:
            fork.kill()
        # The fork's snapshot was never recorded: nothing listed, nothing kept.
        assert (
            Sandbox.list_snapshots(sandbox_id=sandbox.sandbox_id, **e2b.options()).next_items()
            == []
        )
    finally:
        sandbox.kill()


def test_a_private_create_and_its_concurrent_retries_all_get_it_private_and_narrowed(
    e2b: E2bService, upstream: int
) -> None:
    key = f"private-{uuid.uuid4().hex}"

    def create(_: int) -> Sandbox:
        return Sandbox.create(
            "base",
            allow_internet_access=False,
            network={"allow_public_traffic": False},
            idempotency_key=key,
            **e2b.options(),
        )

    with ThreadPoolExecutor(3) as pool:  # the first call and two retries, at once
        made = list(pool.map(create, range(3)))
    try:
        assert len({sandbox.sandbox_id for sandbox in made}) == 1
        # A retry waits for the first call's sandbox and finds it as that call asked:
        # stored with the record, never applied after it was handed out.
        tokens = {sandbox.traffic_access_token for sandbox in made}
        assert len(tokens) == 1 and None not in tokens, tokens
        off = statuses(made[1], upstream)
        assert "one status=403" in off and "two status=403" in off, off
    finally:
        made[0].kill()
