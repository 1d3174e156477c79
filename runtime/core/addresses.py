"""Addresses: which a sandbox may never reach, and allowlist entries written as one.

The refusal table is the address policy every outbound connection passes (the egress
proxy's and the service's own fetches), whatever the allowlists say. Address entries
(``1.1.1.1``, ``8.8.8.0/24``, ``[2001:db8::/32]:8443``) are allowlist and deny-list
entries matched against the address a connection goes to: the IP literal a sandbox
asked for, or each address a name resolves to.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_PORTS = (80, 443)
ANY_PORT: tuple[int, ...] = ()
"""An entry's ports in a deny list when it names none: denying a host denies it all."""
_NUMERIC_LOOKING = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_BRACKETED = re.compile(r"^\[([^\]]+)\](?::([0-9]+))?$")

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


def ports_cover(outer: tuple[int, ...], inner: tuple[int, ...]) -> bool:
    """Whether every port of ``inner`` is one of ``outer`` (``ANY_PORT``: all)."""
    return not outer or (bool(inner) and set(inner) <= set(outer))


def literal_address(host: str) -> IpAddress | None:
    """The address ``host`` is, when written in its usual form (``1.1.1.1``,
    ``::1``, ``[::1]``); ``None`` for a name and for the other numeric forms
    (``2130706433``, ``0x7f.1``), which resolvers read differently."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class AddressRule:
    """One address entry: an address or a range, with its ports (``ANY_PORT``: all)."""

    network: IpNetwork
    ports: tuple[int, ...] = DEFAULT_PORTS

    def matches(self, address: IpAddress, port: int) -> bool:
        return (
            (not self.ports or port in self.ports)
            and address.version == self.network.version
            and (address in self.network)
        )

    def covers(self, inner: AddressRule) -> bool:
        return (
            ports_cover(self.ports, inner.ports)
            and inner.network.version == self.network.version
            and inner.network.subnet_of(self.network)  # type: ignore[arg-type]
        )

    def __str__(self) -> str:
        network = self.network
        text = str(network.network_address) if network.num_addresses == 1 else str(network)
        if self.ports in (DEFAULT_PORTS, ANY_PORT):
            return text
        if network.version == 6:
            text = f"[{text}]"
        return ", ".join(f"{text}:{port}" for port in self.ports)


def parse_address_rule(
    entry: str, default_ports: tuple[int, ...] = DEFAULT_PORTS
) -> AddressRule | None:
    """``entry`` as an address entry (``None``: it is not one): an address or a range
    (``8.8.8.0/24``; host bits are ignored), with one ``:port`` (an IPv6 one in
    brackets: ``[2001:db8::/32]:8443``); without a port, ``default_ports``."""
    text = entry.strip()
    if "%" in text:  # a scoped address (fe80::1%eth0) names a host's interface
        return None
    port = ""
    bracketed = _BRACKETED.match(text)
    if bracketed:
        text, port = bracketed.group(1), bracketed.group(2) or ""
    elif text.count(":") == 1:
        text, _, port = text.partition(":")
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    if not port:
        return AddressRule(network, default_ports)
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        msg = f"{entry!r}: the port must be from 1 to 65535"
        raise ValueError(msg)
    return AddressRule(network, (int(port),))
