"""What a sandbox may reach: the host allowlist and the address policy.

Both the egress proxy and the service's own outbound fetches (``web_fetch``) use
these rules, so one table decides what "a private address" means everywhere.

Allowlist entries are host names, never addresses: ``deb.debian.org`` (ports 80
and 443), ``*.pypi.org`` (any name below ``pypi.org``, not ``pypi.org`` itself),
``git.example.com:8443`` (that port only; list a host again for another port). A
request is allowed when its host matches the deployment's list and, when the agent
narrows it, the agent's list too: an agent can take hosts away, never add one.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from siesta_contract.text import EGRESS_ENTRY

DEFAULT_PORTS = (80, 443)
_ENTRY = re.compile(EGRESS_ENTRY)
_NUMERIC_LOOKING = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Why each range is refused. Order matters: the first match names the reason, so
# the metadata addresses come before the link-local and private ranges they sit in.
_REFUSED: list[tuple[IpNetwork, str]] = [
    (ipaddress.ip_network(net), reason)
    for net, reason in [
        ("169.254.169.254/32", "cloud metadata"),
        ("169.254.170.2/32", "cloud metadata"),  # ECS task metadata
        ("100.100.100.200/32", "cloud metadata"),  # Alibaba Cloud
        ("fd00:ec2::254/128", "cloud metadata"),  # EC2 over IPv6
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.168.0.0/16", "private"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fe80::/10", "link-local"),
        ("fc00::/7", "private"),
        ("ff00::/8", "multicast"),
    ]
]


def refusal(address: IpAddress, allowed: Sequence[IpNetwork] = ()) -> str | None:
    """Why connecting to ``address`` is refused (``None``: it is not).

    IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by the
    address they carry. ``allowed`` opens ranges an operator vouches for, such as
    an internal package mirror (the metadata addresses stay closed).
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return refusal(embedded, allowed)
    for network, reason in _REFUSED:
        if address.version == network.version and address in network:
            if reason != "cloud metadata" and any(
                address.version == net.version and address in net for net in allowed
            ):
                return None
            return reason
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in ipaddress.ip_network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_ip_literal(host: str) -> bool:
    """An address written as a host (``10.0.0.1``, ``[::1]``, ``2130706433``, ``0x7f.1``):
    the forms resolvers turn into addresses without asking DNS."""
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = host.rstrip(".").split(".")
        return bool(labels) and all(_NUMERIC_LOOKING.match(label) for label in labels)
    return True


def normalise_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


@dataclass(frozen=True)
class HostRule:
    """One allowlist entry: a name or ``*.suffix``, with its ports."""

    pattern: str
    ports: tuple[int, ...] = DEFAULT_PORTS

    @property
    def wildcard(self) -> bool:
        return self.pattern.startswith("*.")

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.wildcard:
            return host.endswith(self.pattern[1:])  # ".pypi.org": names below it only
        return host == self.pattern

    def __str__(self) -> str:
        if self.ports == DEFAULT_PORTS:
            return self.pattern
        return ", ".join(f"{self.pattern}:{port}" for port in self.ports)


def parse_rule(entry: str) -> HostRule:
    """``name`` or ``*.suffix``, either with one ``:port`` (list a host once per port)."""
    text = entry.strip()
    if not _ENTRY.fullmatch(text):
        msg = (
            f"{entry!r} is not an allowlist entry: a host name (never an address), "
            "*.suffix with at least two labels, either with one :port from 1 to 65535"
        )
        raise ValueError(msg)
    name, _, port = normalise_host(text).partition(":")
    return HostRule(name, (int(port),)) if port else HostRule(name)


@dataclass(frozen=True)
class Allowlist:
    rules: tuple[HostRule, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        return cls(tuple(parse_rule(entry) for entry in entries))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def allows(self, host: str, port: int) -> bool:
        host = normalise_host(host)
        return any(rule.matches(host, port) for rule in self.rules)

    def __str__(self) -> str:
        return ", ".join(map(str, self.rules)) or "(nothing)"


def covers(outer: HostRule, inner: HostRule) -> bool:
    """Whether every host and port ``inner`` matches, ``outer`` matches too."""
    if not set(inner.ports) <= set(outer.ports):
        return False
    if not inner.wildcard:
        return outer.matches(inner.pattern, inner.ports[0])
    # *.a.b.c lies inside *.b.c and *.a.b.c; no single name covers a wildcard.
    return outer.wildcard and ("." + inner.pattern[2:]).endswith(outer.pattern[1:])


def outside(allowlist: Allowlist, entries: Iterable[str]) -> list[str]:
    """The entries that would reach something ``allowlist`` does not (each port of an
    entry must be within one rule of the list)."""
    found = []
    for entry in entries:
        rule = parse_rule(entry)
        ports = [HostRule(rule.pattern, (port,)) for port in rule.ports]
        if not all(any(covers(mine, port) for mine in allowlist.rules) for port in ports):
            found.append(entry)
    return found


@dataclass(frozen=True)
class SecretBinding:
    """One of the org's secrets offered to a conversation's sandbox: its commands see
    ``env`` holding a placeholder, which the egress proxy replaces with the value in
    requests to the hosts the secret itself names (its operator's choice, not the
    conversation's)."""

    secret: str
    env: str

    def to_dict(self) -> dict[str, str]:
        return {"secret": self.secret, "env": self.env}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SecretBinding:
        return cls(str(data["secret"]), str(data["env"]))


@dataclass(frozen=True)
class HeaderSet:
    """A header the egress proxy sets on requests to ``host`` (E2B's ``rules`` with a
    ``transform``): its value sealed, like a secret's, opened by the proxy alone."""

    host: str
    header: str
    sealed: str

    def applies_to(self, host: str, port: int) -> bool:
        return self._host.allows(host, port)

    @cached_property  # parsed once per rules object, not per connection
    def _host(self) -> Allowlist:
        return Allowlist.parse([self.host])

    @property
    def sealed_name(self) -> str:
        """What the value is sealed under (with the org): bound to host and header."""
        return f"header-set:{self.host}:{self.header.lower()}"

    def to_dict(self) -> dict[str, str]:
        return {"host": self.host, "header": self.header, "sealed": self.sealed}


@dataclass(frozen=True)
class NetworkRules:
    """A conversation's (its sandbox's) own rules, set by its user: a narrowing of
    what the deployment and the agent allow, never a widening."""

    allow: tuple[str, ...] | None = None
    """Only these (each within the deployment's list); ``None``: no narrowing."""
    deny: tuple[str, ...] = ()
    """Taken away from whatever else allows them (any entry: it only subtracts)."""
    internet: bool = True
    """``False``: nothing at all, whatever the lists say."""
    secrets: tuple[SecretBinding, ...] = ()
    """Secrets the proxy substitutes for their placeholders (never widens the lists)."""
    header_sets: tuple[HeaderSet, ...] = ()
    """Headers the proxy sets on requests to their hosts (never widens the lists)."""

    def refusal(self, host: str, port: int) -> str | None:
        """Why these rules refuse ``host:port`` (a reason code), or ``None``."""
        if not self.internet:
            return "internet_off"
        if self._allowlist is not None and not self._allowlist.allows(host, port):
            return "not_in_sandbox_allow"
        if self._denylist.allows(host, port):
            return "sandbox_deny"
        return None

    # Parsed once per rules object (the proxy keeps one per conversation and asks it
    # on every connection), not once per connection: up to 256 + 256 entries.
    @cached_property
    def _allowlist(self) -> Allowlist | None:
        return Allowlist.parse(self.allow) if self.allow is not None else None

    @cached_property
    def _denylist(self) -> Allowlist:
        return Allowlist.parse(self.deny)

    def to_json(self) -> str:
        """How stores keep them."""
        allow = list(self.allow) if self.allow is not None else None
        return json.dumps(
            {
                "allow": allow,
                "deny": list(self.deny),
                "internet": self.internet,
                "secrets": [binding.to_dict() for binding in self.secrets],
                "header_sets": [header.to_dict() for header in self.header_sets],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> NetworkRules:
        data = json.loads(text)
        allow = data["allow"]
        return cls(
            tuple(str(e) for e in allow) if allow is not None else None,
            tuple(str(e) for e in data["deny"]),
            bool(data["internet"]),
            tuple(SecretBinding.from_dict(b) for b in data.get("secrets", ())),  # since 0.2
            tuple(
                HeaderSet(str(h["host"]), str(h["header"]), str(h["sealed"]))
                for h in data.get("header_sets", ())
            ),
        )

    def describe(self) -> str:
        if not self.internet:
            return "its internet access is off"
        allow = "all of them" if self.allow is None else ", ".join(self.allow) or "(nothing)"
        deny = f", denying {', '.join(self.deny)}" if self.deny else ""
        return f"allowing {allow}{deny}"


@dataclass(frozen=True)
class EgressRefusals:
    """How many requests of one conversation the egress proxies refused, and the last."""

    count: int
    last_host: str
    last_reason: str
    last_at: float


@dataclass(frozen=True)
class EgressPolicy:
    """The deployment's list, narrowed by the agent's (``None``: not narrowed) and by
    the conversation's own rules (``None``: none set)."""

    deployment: Allowlist
    agent: Allowlist | None = None
    sandbox: NetworkRules | None = None

    def allows(self, host: str, port: int) -> bool:
        return self.refusal(host, port) is None

    def refusal(self, host: str, port: int) -> str | None:
        """Why ``host:port`` is refused (a reason code), or ``None``."""
        if not self.deployment.allows(host, port):
            return "host_not_allowed"
        if self.agent is not None and not self.agent.allows(host, port):
            return "host_not_allowed"
        return self.sandbox.refusal(host, port) if self.sandbox is not None else None

    def describe(self) -> str:
        described = str(self.deployment)
        if self.agent is not None:
            described += f", narrowed by the agent to {self.agent}"
        if self.sandbox is not None:
            described += f"; the sandbox's network rules: {self.sandbox.describe()}"
        return described
