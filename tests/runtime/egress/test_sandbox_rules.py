"""A conversation's own rules as the proxy applies them: narrowing only, deny on top,
internet off; read through a short cache that outlives a store outage; E2B's options
mapped onto them."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import pytest

from runtime.core import network_rules
from runtime.core.addresses import DEFAULT_PORTS
from runtime.core.errors import InvalidRequest
from runtime.core.network_rules import (
    Allowlist,
    EgressPolicy,
    NetworkRules,
    Rule,
    outside,
    parse_entry,
)
from runtime.e2b.network import e2b_network_rules
from runtime.egress.sandbox_rules import SandboxRules
from runtime.sandbox.network import NetworkRuleOutsideAllowlist, SandboxNetwork
from runtime.seams.stores import NetworkRuleStore

DEPLOYMENT = Allowlist.parse(["*.pypi.org", "files.pythonhosted.org", "git.example.com:8443"])


@pytest.mark.parametrize(
    ("entry", "wider"),
    [
        ("files.pythonhosted.org", False),
        ("x.pypi.org", False),
        ("*.a.pypi.org", False),
        ("*.pypi.org", False),
        ("pypi.org", True),  # the wildcard lists names below it, not itself
        ("*.pythonhosted.org", True),
        ("git.example.com", True),  # listed on 8443 only
        ("git.example.com:8443", False),
        ("files.pythonhosted.org:8080", True),
    ],
)
def test_an_entry_is_outside_when_it_reaches_anything_the_list_does_not(
    entry: str, wider: bool
) -> None:
    assert bool(outside(DEPLOYMENT, [entry])) is wider


def test_a_deny_entry_without_a_port_denies_every_port() -> None:
    own = NetworkRules(deny=("bad.pypi.org", "8.8.8.0/24", "odd.pypi.org:8443"))
    for port in (80, 443, 8443, 22):
        assert own.refusal("bad.pypi.org", port) == "sandbox_deny"
        assert own.refusal("x", port, ipaddress.ip_address("8.8.8.8")) == "sandbox_deny"
    assert own.refusal("odd.pypi.org", 8443) == "sandbox_deny"
    assert own.refusal("odd.pypi.org", 443) is None  # that port only


def test_the_policy_narrows_three_times_and_names_why() -> None:
    own = NetworkRules(allow=("*.pypi.org",), deny=("bad.pypi.org",))
    policy = EgressPolicy(DEPLOYMENT, None, own)
    assert policy.refusal("x.pypi.org", 443) is None
    assert policy.refusal("bad.pypi.org", 443) == "sandbox_deny"
    assert policy.refusal("files.pythonhosted.org", 443) == "not_in_sandbox_allow"
    assert policy.refusal("example.com", 443) == "host_not_allowed"
    assert EgressPolicy(DEPLOYMENT, None, NetworkRules(internet=False)).refusal(
        "x.pypi.org", 443
    ) == ("internet_off")
    agent = EgressPolicy(DEPLOYMENT, Allowlist.parse(["files.pythonhosted.org"]), own)
    assert agent.refusal("x.pypi.org", 443) == "host_not_allowed"


def test_a_conversations_lists_are_parsed_once_not_on_every_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []

    def counting(entry: str, default_ports: tuple[int, ...] = DEFAULT_PORTS) -> Rule:
        parsed.append(entry)
        return parse_entry(entry, default_ports)

    monkeypatch.setattr(network_rules, "parse_entry", counting)
    own = NetworkRules(allow=("*.pypi.org",), deny=("bad.pypi.org",))
    for _ in range(50):
        assert own.refusal("x.pypi.org", 443) is None
        assert own.refusal("bad.pypi.org", 443) == "sandbox_deny"
        assert own.refusal("example.com", 443) == "not_in_sandbox_allow"
    assert sorted(parsed) == ["*.pypi.org", "bad.pypi.org"]


class _Store:
    def __init__(self) -> None:
        self.rules: NetworkRules | None = NetworkRules(internet=False)
        self.failing = False
        self.reads = 0

    def network_rules(self, org: str, conversation: str) -> NetworkRules | None:
        self.reads += 1
        if self.failing:
            msg = "store down"
            raise ConnectionError(msg)
        return self.rules


def test_rules_are_cached_briefly_and_kept_while_the_store_is_down() -> None:
    store, now, events = _Store(), [0.0], list[dict[str, Any]]()
    rules = SandboxRules(
        store,  # type: ignore[arg-type]
        cache_seconds=2.0,
        emit=events.append,
        clock=lambda: now[0],
    )

    async def scenario() -> None:
        assert await rules.get("o", "c") == NetworkRules(internet=False)
        store.rules = None
        assert await rules.get("o", "c") == NetworkRules(internet=False)  # cached
        now[0] = 2.5
        assert await rules.get("o", "c") is None  # read again
        store.failing, now[0] = True, 5.0
        assert await rules.get("o", "c") is None  # the last read stays in force
        # Never read: the deployment's and the agent's lists alone, until it answers.
        assert await rules.get("o", "never-read") is None

    asyncio.run(scenario())
    assert store.reads == 4
    assert [e["event"] for e in events] == ["network_rules_unavailable"] * 2


def test_a_burst_of_connections_on_a_cache_miss_costs_one_read_per_conversation() -> None:
    store, events = _Store(), list[dict[str, Any]]()
    rules = SandboxRules(store, cache_seconds=2.0, emit=events.append)  # type: ignore[arg-type]

    async def burst() -> list[NetworkRules | None]:
        connections = [rules.get("o", conversation) for conversation in ("c", "d") * 20]
        return await asyncio.gather(*connections)

    assert asyncio.run(burst()) == [NetworkRules(internet=False)] * 40
    assert store.reads == 2


def test_one_connection_going_away_does_not_fail_the_others_waiting_for_the_read() -> None:
    store = _Store()
    rules = SandboxRules(store, cache_seconds=2.0, emit=lambda event: None)  # type: ignore[arg-type]

    async def scenario() -> None:
        first = asyncio.ensure_future(rules.get("o", "c"))
        second = asyncio.ensure_future(rules.get("o", "c"))
        await asyncio.sleep(0)  # both wait for the one read
        first.cancel()
        assert await second == NetworkRules(internet=False)

    asyncio.run(scenario())
    assert store.reads == 1


def network() -> SandboxNetwork:
    store: NetworkRuleStore = None  # type: ignore[assignment]  # checking needs none
    return SandboxNetwork(store, Allowlist.parse(["one.test", "two.test", "1.1.1.0/24"]))


@pytest.mark.parametrize(
    ("access", "options", "expected"),
    [
        (None, None, None),
        (False, None, NetworkRules(internet=False)),
        (None, {"denyOut": ["0.0.0.0/0"]}, NetworkRules(internet=False)),
        (None, {"denyOut": ["0.0.0.0/0"], "allowOut": ["one.test"]}, NetworkRules(("one.test",))),
        (False, {"allowOut": ["one.test"]}, NetworkRules(("one.test",))),
        (
            None,
            {"denyOut": ["two.test", "one.test"], "allowOut": ["one.test"]},
            NetworkRules(None, ("two.test", "one.test"), exempt=("one.test",)),  # allow wins
        ),
        (
            None,
            {"denyOut": ["8.8.8.0/24"], "allowOut": ["8.8.8.8"]},
            NetworkRules(None, ("8.8.8.0/24",), exempt=("8.8.8.8",)),
        ),
        (None, {"denyOut": ["::1"]}, NetworkRules(None, ("::1",))),  # denying needs no list
        (
            None,
            {"denyOut": ["0.0.0.0/0"], "allowOut": ["1.1.1.1", "one.test"]},
            NetworkRules(("1.1.1.1", "one.test")),
        ),
        (None, {"allowOut": ["one.test"]}, NetworkRules()),  # E2B: allowOut only excepts
        (True, {"allowOut": ["0.0.0.0/0"], "denyOut": ["one.test"]}, NetworkRules()),
        (None, {"dnsServers": ["1.1.1.1"], "allowPublicTraffic": False}, None),
    ],
)
def test_e2b_options_map_onto_rules(
    access: bool | None, options: dict[str, Any] | None, expected: NetworkRules | None
) -> None:
    assert e2b_network_rules(network(), access, options) == expected


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"denyOut": ["1.1.1.1/33"]}, "not an allowlist entry"),
        # Header transforms need the secrets key (no sealing given here).
        ({"rules": {"one.test": [{}]}}, "network.rules: header transforms need secrets"),
        ({"egressProxy": {"address": "p:1080"}}, "network.egressProxy: not supported"),
        ({"allowOut": "one.test"}, "must be a list"),
    ],
)
def test_e2b_options_that_cannot_be_honoured_are_refused(
    options: dict[str, Any], error: str
) -> None:
    with pytest.raises(InvalidRequest, match=error):
        e2b_network_rules(network(), None, options)


def test_e2b_hosts_outside_the_deployments_list_are_refused() -> None:
    with pytest.raises(NetworkRuleOutsideAllowlist, match=r"example\.com"):
        e2b_network_rules(network(), False, {"allowOut": ["example.com"]})
    with pytest.raises(NetworkRuleOutsideAllowlist, match=r"10\.0\.0\.0/8"):  # ranges too
        e2b_network_rules(network(), False, {"allowOut": ["10.0.0.0/8"]})
