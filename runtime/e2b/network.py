"""E2B's network options mapped onto a conversation's network rules.

What the SDKs send (``Sandbox.create(allow_internet_access=..., network=...)`` and
``update_network``): ``allow_internet_access`` (``False``: as ``denyOut:
["0.0.0.0/0"]``) and ``network.allowOut`` / ``network.denyOut``, lists of host
names, addresses or CIDR ranges, where an ``allowOut`` entry wins over a
``denyOut`` one. So:

- everything denied (``0.0.0.0/0`` or ``allow_internet_access=False``) and hosts
  allowed: only those hosts (``allow``); nothing allowed: no internet at all;
- hosts denied: ``deny`` (less any host ``allowOut`` names too);
- ``allowOut`` alone changes nothing in E2B either (all traffic is allowed).

The egress proxy decides by host name, never by address, so addresses and CIDR
ranges other than "all traffic" are refused (400, naming them), as are a custom
``egressProxy`` and per-host ``rules`` (header transforms). ``dnsServers`` is
ignored: sandboxes have no DNS, the proxy resolves names. ``allowPublicTraffic``
and ``maskRequestHost`` are about reaching the sandbox's ports, not about egress.
Hosts must lie within the deployment's allowlist, like ``/v1``'s rules.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from runtime.core.errors import InvalidRequest
from runtime.core.network_rules import NetworkRules
from runtime.sandbox.network import SandboxNetwork

ALL_TRAFFIC = frozenset({"0.0.0.0/0", "::/0"})
UNSUPPORTED = ("egressProxy", "rules")


class UnsupportedNetworkOption(InvalidRequest):
    code = "network_option_unsupported"


def e2b_network_rules(
    network: SandboxNetwork, allow_internet_access: Any, options: Any
) -> NetworkRules | None:
    """The rules E2B's options ask for (``None``: none given), checked like ``/v1``'s."""
    if allow_internet_access is not None and not isinstance(allow_internet_access, bool):
        msg = "allow_internet_access must be true or false"
        raise InvalidRequest(msg)
    if options is None:
        options = {}
    if not isinstance(options, dict):
        msg = "network must be an object"
        raise InvalidRequest(msg)
    given = [name for name in UNSUPPORTED if options.get(name)]
    if given:
        names = ", network.".join(given)
        msg = f"network.{names}: not supported (see the E2B table in docs/guides/e2b.md)"
        raise UnsupportedNetworkOption(msg)
    allow_out, deny_out = _entries(options, "allowOut"), _entries(options, "denyOut")
    if allow_internet_access is None and allow_out is None and deny_out is None:
        return None
    allow_hosts, allow_all = _hosts(allow_out or [])
    deny_hosts, deny_all = _hosts(deny_out or [])
    if allow_all:
        return network.checked(None, [], True)
    if deny_all or allow_internet_access is False:
        return (
            network.checked(allow_hosts, [], True) if allow_hosts else NetworkRules(internet=False)
        )
    return network.checked(None, [host for host in deny_hosts if host not in allow_hosts], True)


def _entries(options: dict[str, Any], name: str) -> list[str] | None:
    value = options.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        msg = f"network.{name} must be a list of strings"
        raise InvalidRequest(msg)
    return value


def _hosts(entries: list[str]) -> tuple[list[str], bool]:
    """The host names, and whether "all traffic" is among the entries; any other
    address or range is refused (the proxy allows by name)."""
    addresses = [entry for entry in entries if entry not in ALL_TRAFFIC and _is_address(entry)]
    if addresses:
        msg = (
            f"{', '.join(addresses)}: addresses and CIDR ranges are not supported (only "
            "0.0.0.0/0 for all traffic): the egress proxy allows and denies by host name"
        )
        raise UnsupportedNetworkOption(msg, entries=addresses)
    return [entry for entry in entries if entry not in ALL_TRAFFIC], any(
        entry in ALL_TRAFFIC for entry in entries
    )


def _is_address(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True
