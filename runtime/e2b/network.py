"""E2B's network options mapped onto a conversation's network rules.

What the SDKs send (``Sandbox.create(allow_internet_access=..., network=...)`` and
``update_network``): ``allow_internet_access`` (``False``: as ``denyOut:
["0.0.0.0/0"]``) and ``network.allowOut`` / ``network.denyOut``, lists of host
names, addresses or CIDR ranges, where an ``allowOut`` entry wins over a
``denyOut`` one. So:

- everything denied (``0.0.0.0/0`` or ``allow_internet_access=False``) and entries
  allowed: only those (``allow``); nothing allowed: no internet at all;
- entries denied: ``deny``, with ``allowOut``'s entries ``exempt`` from it;
- ``allowOut`` alone changes nothing in E2B either (all traffic is allowed).

Addresses and ranges are enforced where traffic leaves, the egress proxy: against
the IP literal a sandbox asks for, and against every address a name resolves to
(``runtime/core/addresses.py``). A sandbox has no other route out, so no traffic
escapes them. Like names, an allowed address must lie within the deployment's
allowlist (``SIESTA_EGRESS__ALLOW`` lists addresses too); a denied one need not. A
custom ``egressProxy`` is refused. Per-host ``rules`` with header ``transform``s are the proxy's to
apply: each header value is sealed like a secret (``runtime/sandbox/secrets.py``) and
set on the sandbox's requests to that host (HTTPS read through the deployment's
authority); without ``SIESTA_EGRESS__SECRETS_KEY`` they are refused. A rules key is a
host name (``name:port`` for another port than 80 and 443); at most
``MAX_RULE_HOSTS`` hosts and ``MAX_RULE_HEADERS`` headers each. ``dnsServers`` is
ignored: sandboxes have no DNS, the proxy resolves names. ``allowPublicTraffic``
and ``maskRequestHost`` are about reaching the sandbox's ports, not about egress.
Hosts must lie within the deployment's allowlist, like ``/v1``'s rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runtime.core.errors import InvalidRequest
from runtime.core.network_rules import HeaderSet, NetworkRules
from runtime.sandbox.network import SandboxNetwork

ALL_TRAFFIC = frozenset({"0.0.0.0/0", "::/0"})
UNSUPPORTED = ("egressProxy",)
MAX_RULE_HOSTS = 16
MAX_RULE_HEADERS = 16
SealHeader = Callable[[str, str, str], HeaderSet]
"""(host, header, value) → the header set, its value sealed for the caller's org."""


class UnsupportedNetworkOption(InvalidRequest):
    code = "network_option_unsupported"


def e2b_network_rules(
    network: SandboxNetwork,
    allow_internet_access: Any,
    options: Any,
    seal_header: SealHeader | None = None,
) -> NetworkRules | None:
    """The rules E2B's options ask for (``None``: none given), checked like ``/v1``'s;
    ``seal_header``: how header transforms are kept (``None``: refused)."""
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
    header_sets = _header_sets(options.get("rules"), seal_header)
    if allow_internet_access is None and allow_out is None and deny_out is None:
        return NetworkRules(header_sets=header_sets) if header_sets else None
    return replace(
        _lists(network, allow_internet_access, allow_out, deny_out), header_sets=header_sets
    )


def _lists(
    network: SandboxNetwork,
    allow_internet_access: Any,
    allow_out: list[str] | None,
    deny_out: list[str] | None,
) -> NetworkRules:
    allowed, allow_all = _split(allow_out or [])
    denied, deny_all = _split(deny_out or [])
    if allow_all:
        return network.checked(None, [], True)
    if deny_all or allow_internet_access is False:
        return network.checked(allowed, [], True) if allowed else NetworkRules(internet=False)
    return network.checked(None, denied, True, exempt=allowed if denied else [])


def _header_sets(rules: Any, seal_header: SealHeader | None) -> tuple[HeaderSet, ...]:
    """``network.rules``: ``{host: [{"transform": {"headers": {name: value}}}]}``."""
    if not rules:
        return ()
    if not isinstance(rules, dict) or len(rules) > MAX_RULE_HOSTS:
        msg = f"network.rules must be an object of at most {MAX_RULE_HOSTS} hosts"
        raise InvalidRequest(msg, limit=MAX_RULE_HOSTS)
    if seal_header is None:
        msg = (
            "network.rules: header transforms need secrets on this deployment "
            "(SIESTA_EGRESS__SECRETS_KEY, see docs/guides/security.md)"
        )
        raise UnsupportedNetworkOption(msg)
    found: list[HeaderSet] = []
    for host, host_rules in rules.items():
        if not isinstance(host_rules, list):
            msg = f"network.rules[{host!r}] must be a list of rules"
            raise InvalidRequest(msg)
        headers: dict[str, str] = {}
        for rule in host_rules:
            transform = rule.get("transform") if isinstance(rule, dict) else None
            given = transform.get("headers") if isinstance(transform, dict) else None
            if transform is not None and not isinstance(given, (dict, type(None))):
                msg = f"network.rules[{host!r}]: transform.headers must be an object"
                raise InvalidRequest(msg)
            headers.update(given or {})  # later rules win, as on E2B
        if len(headers) > MAX_RULE_HEADERS:
            msg = f"network.rules[{host!r}]: at most {MAX_RULE_HEADERS} headers"
            raise InvalidRequest(msg, limit=MAX_RULE_HEADERS)
        for header, value in headers.items():
            if not isinstance(value, str):
                msg = f"network.rules[{host!r}]: the value of {header} must be a string"
                raise InvalidRequest(msg)
            found.append(seal_header(str(host), str(header), value))
    return tuple(found)


def _entries(options: dict[str, Any], name: str) -> list[str] | None:
    value = options.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        msg = f"network.{name} must be a list of strings"
        raise InvalidRequest(msg)
    return value


def _split(entries: list[str]) -> tuple[list[str], bool]:
    """The entries, and whether "all traffic" is among them."""
    return [entry for entry in entries if entry not in ALL_TRAFFIC], any(
        entry in ALL_TRAFFIC for entry in entries
    )


def masked(rules: Any) -> Any:
    """``network.rules`` as logs may show them: every header value a transform sets is
    a secret, whatever the header's name, so each is replaced (as the executions log
    replaces the values of secret-looking keys)."""
    if not isinstance(rules, dict):
        return rules
    return {
        host: [
            {"transform": {"headers": dict.fromkeys(_headers_of(rule), "[redacted]")}}
            for rule in host_rules
        ]
        if isinstance(host_rules, list)
        else "[redacted]"
        for host, host_rules in rules.items()
    }


def _headers_of(rule: Any) -> list[str]:
    transform = rule.get("transform") if isinstance(rule, dict) else None
    headers = transform.get("headers") if isinstance(transform, dict) else None
    return [str(name) for name in headers] if isinstance(headers, dict) else []
