"""What a sandbox may reach: the deployment's allowlist, the agent's, the sandbox's.

Allowlist entries are host names: ``deb.debian.org`` (ports 80 and 443),
``*.pypi.org`` (any name below ``pypi.org``, not ``pypi.org`` itself),
``git.example.com:8443`` (that port only; list a host again for another port); or
addresses and ranges (``1.1.1.1``, ``8.8.8.0/24``, ``runtime/core/addresses.py``),
which match the address a connection goes to: an IP literal asked for, or every
address a name resolves to. A request is allowed when its host matches the
deployment's list and, when the agent narrows it, the agent's list too: an agent
can take hosts away, never add one. Whatever the lists say, the address policy
(``runtime.core.addresses.refusal``: private, loopback, metadata) applies on top.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property

from siesta_contract.text import EGRESS_ENTRY

from runtime.core.addresses import (
    ANY_PORT,
    DEFAULT_PORTS,
    AddressRule,
    IpAddress,
    parse_address_rule,
    ports_cover,
)

_ENTRY = re.compile(EGRESS_ENTRY)


def normalise_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


@dataclass(frozen=True)
class HostRule:
    """One allowlist entry: a name or ``*.suffix``, with its ports (``ANY_PORT``: all)."""

    pattern: str
    ports: tuple[int, ...] = DEFAULT_PORTS

    @property
    def wildcard(self) -> bool:
        return self.pattern.startswith("*.")

    def matches(self, host: str, port: int) -> bool:
        return (not self.ports or port in self.ports) and self.names(host)

    def names(self, host: str) -> bool:
        if self.wildcard:
            return host.endswith(self.pattern[1:])  # ".pypi.org": names below it only
        return host == self.pattern

    def __str__(self) -> str:
        if self.ports in (DEFAULT_PORTS, ANY_PORT):
            return self.pattern
        return ", ".join(f"{self.pattern}:{port}" for port in self.ports)


Rule = HostRule | AddressRule


def parse_rule(entry: str, default_ports: tuple[int, ...] = DEFAULT_PORTS) -> HostRule:
    """``name`` or ``*.suffix``, either with one ``:port`` (list a host once per port);
    without one, ``default_ports``."""
    text = entry.strip()
    if not _ENTRY.fullmatch(text):
        msg = (
            f"{entry!r} is not an allowlist entry: a host name (never an address), "
            "*.suffix with at least two labels, either with one :port from 1 to 65535"
        )
        raise ValueError(msg)
    name, _, port = normalise_host(text).partition(":")
    return HostRule(name, (int(port),) if port else default_ports)


def parse_entry(entry: str, default_ports: tuple[int, ...] = DEFAULT_PORTS) -> Rule:
    """A host name entry (``parse_rule``) or an address entry (``8.8.8.0/24``)."""
    address = parse_address_rule(entry, default_ports)
    if address is not None:
        return address
    try:
        return parse_rule(entry, default_ports)
    except ValueError:
        msg = (
            f"{entry!r} is not an allowlist entry: a host name, *.suffix with at least "
            "two labels, an address or a CIDR range, each with one :port from 1 to 65535 "
            "(an IPv6 one in brackets)"
        )
        raise ValueError(msg) from None


@dataclass(frozen=True)
class Allowlist:
    rules: tuple[Rule, ...] = ()

    @classmethod
    def parse(
        cls, entries: Iterable[str], default_ports: tuple[int, ...] = DEFAULT_PORTS
    ) -> Allowlist:
        """``default_ports``: what an entry without a port matches (a deny list's
        ``ANY_PORT``: denying a host denies it on every port)."""
        return cls(tuple(parse_entry(entry, default_ports) for entry in entries))

    def __bool__(self) -> bool:
        return bool(self.rules)

    @cached_property
    def by_address(self) -> bool:
        """Whether any entry is an address or a range (a name's addresses matter)."""
        return any(isinstance(rule, AddressRule) for rule in self.rules)

    def allows(self, host: str, port: int, address: IpAddress | None = None) -> bool:
        """Whether an entry matches ``host`` by name, or ``address`` (where the
        connection goes) by address."""
        host = normalise_host(host)
        for rule in self.rules:
            if isinstance(rule, HostRule):
                if rule.matches(host, port):
                    return True
            elif address is not None and rule.matches(address, port):
                return True
        return False

    def __str__(self) -> str:
        return ", ".join(map(str, self.rules)) or "(nothing)"


def covers(outer: Rule, inner: Rule) -> bool:
    """Whether every host and port ``inner`` matches, ``outer`` matches too (a name's
    addresses are not known before it is asked for: names and addresses never
    cover each other)."""
    if isinstance(outer, AddressRule) and isinstance(inner, AddressRule):
        return outer.covers(inner)
    if isinstance(outer, AddressRule) or isinstance(inner, AddressRule):
        return False
    if not ports_cover(outer.ports, inner.ports):
        return False
    if not inner.wildcard:
        return outer.names(inner.pattern)
    # *.a.b.c lies inside *.b.c and *.a.b.c; no single name covers a wildcard.
    return outer.wildcard and ("." + inner.pattern[2:]).endswith(outer.pattern[1:])


def outside(allowlist: Allowlist, entries: Iterable[str]) -> list[str]:
    """The entries that would reach something ``allowlist`` does not (each port of an
    entry must be within one rule of the list)."""
    found = []
    for entry in entries:
        rule = parse_entry(entry)
        ports = [replace(rule, ports=(port,)) for port in rule.ports]
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
    exempt: tuple[str, ...] = ()
    """What ``deny`` never takes away (E2B's ``allowOut`` beside a ``denyOut``: there,
    allow wins); it allows nothing the other lists do not."""

    def refusal(self, host: str, port: int, address: IpAddress | None = None) -> str | None:
        """Why these rules refuse ``host:port`` (a reason code), or ``None``;
        ``address``: where the connection goes (for address entries)."""
        if not self.internet:
            return "internet_off"
        if self._allowlist is not None and not self._allowlist.allows(host, port, address):
            return "not_in_sandbox_allow"
        if self._denylist.allows(host, port, address) and not self._exempt.allows(
            host, port, address
        ):
            return "sandbox_deny"
        return None

    # Parsed once per rules object (the proxy keeps one per conversation and asks it
    # on every connection), not once per connection: up to 256 + 256 entries.
    @cached_property
    def _allowlist(self) -> Allowlist | None:
        return Allowlist.parse(self.allow) if self.allow is not None else None

    @cached_property
    def _denylist(self) -> Allowlist:
        return Allowlist.parse(self.deny, ANY_PORT)

    @cached_property
    def _exempt(self) -> Allowlist:
        return Allowlist.parse(self.exempt, ANY_PORT)

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
                "exempt": list(self.exempt),
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
            tuple(str(e) for e in data.get("exempt", ())),  # since 0.2
        )

    def describe(self) -> str:
        if not self.internet:
            return "its internet access is off"
        allow = "all of them" if self.allow is None else ", ".join(self.allow) or "(nothing)"
        deny = f", denying {', '.join(self.deny)}" if self.deny else ""
        if self.deny and self.exempt:
            deny += f" except {', '.join(self.exempt)}"
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

    def allows(self, host: str, port: int, address: IpAddress | None = None) -> bool:
        return self.refusal(host, port, address) is None

    def refusal(self, host: str, port: int, address: IpAddress | None = None) -> str | None:
        """Why ``host:port`` is refused (a reason code), or ``None``. Without
        ``address``, by name alone: a name refused so may still be allowed by its
        address when ``by_address``."""
        if not self.deployment.allows(host, port, address):
            return "host_not_allowed"
        if self.agent is not None and not self.agent.allows(host, port, address):
            return "host_not_allowed"
        if self.sandbox is not None:
            return self.sandbox.refusal(host, port, address)
        return None

    @property
    def by_address(self) -> bool:
        """Whether an address entry could allow a name its names do not (only the
        deployment's list can open an address: the others lie within it)."""
        return self.deployment.by_address

    def describe(self) -> str:
        described = str(self.deployment)
        if self.agent is not None:
            described += f", narrowed by the agent to {self.agent}"
        if self.sandbox is not None:
            described += f"; the sandbox's network rules: {self.sandbox.describe()}"
        return described
