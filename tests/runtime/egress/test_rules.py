"""The allowlist and the address policy, rule by rule."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siesta_contract.text import NETWORK_ENTRY

from runtime.core.addresses import is_ip_literal, refusal
from runtime.core.network_rules import (
    Allowlist,
    EgressPolicy,
    NetworkRules,
    parse_entry,
    parse_rule,
)
from runtime.egress.credentials import EgressClaims, basic_credentials, sign, verify

DEPLOYMENT = Allowlist.parse(
    ["deb.debian.org", "*.pypi.org", "git.example.com:8443", "git.example.com:9418"]
)


@pytest.mark.parametrize(
    ("host", "port", "allowed"),
    [
        ("deb.debian.org", 80, True),
        ("deb.debian.org", 443, True),
        ("DEB.Debian.ORG.", 443, True),  # case and a trailing dot do not matter
        ("deb.debian.org", 8080, False),  # no port given: 80 and 443 only
        ("security.debian.org", 80, False),
        ("debian.org", 80, False),
        ("deb.debian.org.evil.com", 80, False),
        ("files.pypi.org", 443, True),
        ("a.b.pypi.org", 443, True),
        ("pypi.org", 443, False),  # *.suffix: names below it, not the suffix itself
        ("evilpypi.org", 443, False),
        ("git.example.com", 8443, True),
        ("git.example.com", 9418, True),
        ("git.example.com", 443, False),  # explicit ports replace the defaults
    ],
)
def test_deployment_allowlist(host: str, port: int, allowed: bool) -> None:
    assert DEPLOYMENT.allows(host, port) is allowed


@pytest.mark.parametrize(
    ("agent", "host", "allowed"),
    [
        (None, "files.pypi.org", True),  # not narrowed: the deployment's list
        (["*.pypi.org"], "files.pypi.org", True),
        (["files.pypi.org"], "files.pypi.org", True),
        (["files.pypi.org"], "upload.pypi.org", False),  # narrowed away
        (["deb.debian.org"], "files.pypi.org", False),
        ([], "deb.debian.org", False),  # an empty list: no network for this agent
        (["example.com"], "example.com", False),  # cannot widen
        (["*.debian.org"], "security.debian.org", False),  # nor with a wildcard
    ],
)
def test_an_agent_narrows_never_widens(agent: list[str] | None, host: str, allowed: bool) -> None:
    policy = EgressPolicy(DEPLOYMENT, Allowlist.parse(agent) if agent is not None else None)
    assert policy.allows(host, 443) is allowed


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "*",
        "*.com",
        "10.0.0.1",
        "10.0.0.1:80",
        "[::1]",
        "exa mple.com",
        "a..b",
        "-a.com",
        "host:0",
        "host:x",
        "h:70000",
        "h:80,443",
        "*.*.example.com",
    ],
)
def test_bad_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="not an allowlist entry"):
        parse_rule(entry)


@pytest.mark.parametrize(
    ("host", "literal"),
    [
        ("10.0.0.1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("2130706433", True),  # 127.0.0.1 as one number
        ("0x7f.1", True),
        ("127.1", True),
        ("deb.debian.org", False),
        ("1password.com", False),
    ],
)
def test_ip_literals(host: str, literal: bool) -> None:
    assert is_ip_literal(host) is literal


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.20.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd12::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # mapped IPv4 judged as IPv4
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:a9fe:a9fe::1", "cloud metadata"),  # 6to4 of 169.254.169.254
        ("203.0.113.80", None),  # documentation range: reachable mirrors live there
        ("151.101.2.132", None),
        ("2a04:4e42::644", None),
    ],
)
def test_address_policy(address: str, reason: str | None) -> None:
    assert refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    ("entry", "shown"),
    [
        ("1.1.1.1", "1.1.1.1"),
        ("8.8.8.0/24", "8.8.8.0/24"),
        ("8.8.8.9/24", "8.8.8.0/24"),  # host bits are ignored, as E2B's firewall does
        ("1.1.1.1:8443", "1.1.1.1:8443"),
        ("2001:db8::/32", "2001:db8::/32"),
        ("[2001:db8::/32]:8443", "[2001:db8::/32]:8443"),
        ("[::1]", "::1"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("deb.debian.org:8443", "deb.debian.org:8443"),  # a name stays a name
    ],
)
def test_address_entries(entry: str, shown: str) -> None:
    assert str(parse_entry(entry)) == shown


@pytest.mark.parametrize(
    "entry", ["999.1.1.1", "1.1.1.1/33", "1.1.1.1:0", "[::1]:70000", "fe80::1%eth0", "1::2::3"]
)
def test_bad_address_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="65535"):
        parse_entry(entry)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(f"^{NETWORK_ENTRY}$", fullmatch=True))
def test_every_entry_the_contract_lets_through_parses(entry: str) -> None:
    """What the API's schema accepts, the service accepts: no 422 on a valid entry."""
    assert str(parse_entry(entry))


ADDRESSED = Allowlist.parse(["deb.debian.org", "1.1.1.1", "8.8.8.0/24:443", "2001:db8::/32"])


@pytest.mark.parametrize(
    ("host", "port", "address", "allowed"),
    [
        ("1.1.1.1", 443, "1.1.1.1", True),  # the literal asked for
        ("1.1.1.1", 8080, "1.1.1.1", False),  # 80 and 443 only
        ("1.1.1.2", 443, "1.1.1.2", False),
        ("dns.google", 443, "8.8.8.8", True),  # a name whose address is listed
        ("dns.google", 80, "8.8.8.8", False),  # that entry is for 443 only
        ("dns.google", 443, None, False),  # by name alone: not listed
        ("deb.debian.org", 80, "151.101.2.132", True),  # listed by name: any address
        ("v6.example", 443, "2001:db8::1", True),
        ("v6.example", 443, "::ffff:1.1.1.1", False),  # mapped: another version
    ],
)
def test_allowlist_by_address(host: str, port: int, address: str | None, allowed: bool) -> None:
    at = ipaddress.ip_address(address) if address is not None else None
    assert ADDRESSED.allows(host, port, at) is allowed


def test_e2b_precedence_allow_wins_over_deny() -> None:
    """``denyOut: [8.8.8.0/24]`` with ``allowOut: [8.8.8.8]``: that one address is
    reachable, its neighbours not; a denied range catches names resolving into it."""
    rules = NetworkRules(deny=("8.8.8.0/24", "evil.example"), exempt=("8.8.8.8",))
    policy = EgressPolicy(
        Allowlist.parse(
            [
                "*.evil.example",
                "*.other.example",
                "other.example",
                "evil.example",
                "dns.google",
                "0.0.0.0/0",
            ]
        ),
        None,
        rules,
    )
    assert policy.refusal("8.8.8.8", 443, ipaddress.ip_address("8.8.8.8")) is None
    assert policy.refusal("8.8.8.4", 443, ipaddress.ip_address("8.8.8.4")) == "sandbox_deny"
    assert policy.refusal("dns.google", 443, ipaddress.ip_address("8.8.4.4")) is None
    assert policy.refusal("other.example", 443, ipaddress.ip_address("8.8.8.1")) == "sandbox_deny"
    assert policy.refusal("evil.example", 443, ipaddress.ip_address("9.9.9.9")) == "sandbox_deny"
    assert policy.refusal("1.2.3.4", 443, ipaddress.ip_address("1.2.3.4")) is None


def test_a_sandbox_allowlist_of_addresses_narrows() -> None:
    rules = NetworkRules(allow=("1.1.1.1",))
    policy = EgressPolicy(Allowlist.parse(["0.0.0.0/0", "a.example"]), None, rules)
    assert policy.by_address
    assert policy.refusal("1.1.1.1", 443, ipaddress.ip_address("1.1.1.1")) is None
    assert policy.refusal("8.8.8.8", 443, ipaddress.ip_address("8.8.8.8")) == (
        "not_in_sandbox_allow"
    )
    assert policy.refusal("a.example", 443) == "not_in_sandbox_allow"
    assert not EgressPolicy(Allowlist.parse(["a.example"])).by_address


def test_operator_ranges_open_private_addresses_but_never_metadata() -> None:
    allowed = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("169.254.0.0/16")]
    assert refusal(ipaddress.ip_address("10.1.2.3"), allowed) is None
    assert refusal(ipaddress.ip_address("169.254.1.1"), allowed) is None
    assert refusal(ipaddress.ip_address("169.254.169.254"), allowed) == "cloud metadata"
    assert refusal(ipaddress.ip_address("192.168.1.1"), allowed) == "private"


def test_credentials_round_trip_and_tampering() -> None:
    key = b"k" * 32
    claims = EgressClaims("org-1", "conv-1", ("files.pypi.org",), 1700000000.25)
    user, password = sign(key, claims)
    assert verify(key, user, password) == claims
    assert verify(b"x" * 32, user, password) is None  # another deployment's key
    other_user, _ = sign(key, EgressClaims("org-2", "conv-1"))
    assert verify(key, other_user, password) is None  # a signature for other claims
    flipped = password[:-1] + ("1" if password[-1] == "0" else "0")
    assert verify(key, user, flipped) is None
    assert verify(key, user + "x", password) is None
    unnarrowed = EgressClaims("org-1", "conv-1", issued_at=1700000000.0)
    assert verify(key, *sign(key, unnarrowed)) == unnarrowed


def test_credentials_say_when_they_were_issued() -> None:
    key = b"k" * 32
    before = time.time()
    now = verify(key, *sign(key, EgressClaims("o", "c")))
    assert now is not None and now.issued_at is not None
    assert before - 0.001 <= now.issued_at <= time.time()
    # To the millisecond, rounded down: never later than they were issued.
    exact = verify(key, *sign(key, EgressClaims("o", "c", issued_at=1700000000.12399)))
    assert exact is not None and exact.issued_at == 1700000000.123
    # The format before issue times (same prefix) still verifies, saying none.
    payload = base64.urlsafe_b64encode(b'{"c":"c","o":"o"}').decode().rstrip("=")
    user = "s1." + payload
    password = hmac.new(key, user.encode(), hashlib.sha256).hexdigest()
    assert verify(key, user, password) == EgressClaims("o", "c")


@pytest.mark.parametrize(
    ("header", "pair"),
    [
        ("Basic dXNlcjpwYXNz", ("user", "pass")),
        ("basic dXNlcjpwYTpzcw==", ("user", "pa:ss")),
        ("Bearer dXNlcjpwYXNz", None),
        ("Basic not-base64!", None),
        ("Basic dXNlcg==", None),  # no colon
    ],
)
def test_basic_credentials(header: str, pair: tuple[str, str] | None) -> None:
    assert basic_credentials(header) == pair
