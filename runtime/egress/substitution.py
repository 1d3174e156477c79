"""Secrets put in place of their placeholders, by the egress proxy, for the hosts a
conversation's bindings name (``NetworkRules.secrets``) and nowhere else.

Only a request's head is rewritten, and only the header a binding names: a
placeholder in a URL, a body or another header goes as it is (useless). Plain HTTP
requests are rewritten as they pass; HTTPS ones are read by ending the sandbox's TLS
with a certificate of the deployment's authority (``authority.py``) and opening the
proxy's own TLS to the real server, verified. Such a connection carries one request
(``Connection: close`` both ways): each request is rewritten, none slips through on
a kept-alive connection. What a client pipelines after its first request goes on
unrewritten: its placeholders stay placeholders.

Values are read from the store sealed and opened here, kept in memory for
``cache_seconds`` (a deletion or a change reaches the proxy within it), and never
written anywhere: not in events, not in refusals.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.network_rules import Allowlist, NetworkRules
from runtime.egress.placeholders import placeholder
from runtime.egress.sealing import SealedSecretUnreadable, SecretSealer
from runtime.seams.stores import NetworkRuleStore

Emit = Callable[[dict[str, object]], None]


@dataclass(frozen=True)
class Substitution:
    header: bytes
    """Lower case."""
    placeholder: bytes
    """Empty: the header is set to ``value`` (added, or replacing what the request had)."""
    value: bytes


class SecretValues:
    """The opened values the proxy substitutes, read from the store and kept briefly."""

    def __init__(
        self,
        source: NetworkRuleStore | None,
        sealer: SecretSealer,
        egress_key: bytes,
        *,
        cache_seconds: float,
        emit: Emit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._sealer = sealer
        self._egress_key = egress_key
        self._cache_seconds = cache_seconds
        self._emit = emit
        self._clock = clock
        self._kept: dict[tuple[str, str], tuple[_Opened | None, float]] = {}

    async def substitutions(
        self, org: str, conversation: str, rules: NetworkRules | None, host: str, port: int
    ) -> list[Substitution]:
        """What to replace in a request of the conversation to ``host:port``: each secret
        it is offered whose own hosts include this one."""
        if rules is None or not (rules.secrets or rules.header_sets):
            return []
        found: list[Substitution] = []
        for binding in rules.secrets:
            opened = await self._opened(org, binding.secret)
            if opened is None or not opened.applies_to(host, port):
                continue  # deleted, sealed with another key, or not for this host
            marker = placeholder(self._egress_key, org, conversation, binding.secret)
            found.append(Substitution(opened.header, marker.encode(), opened.value))
        for header_set in rules.header_sets:
            if not header_set.applies_to(host, port):
                continue
            try:
                value = self._sealer.open(org, header_set.sealed_name, header_set.sealed)
            except SealedSecretUnreadable as exc:
                self._emit({"event": "secret_unreadable", "org": org, "detail": str(exc)})
                continue
            found.append(Substitution(header_set.header.lower().encode(), b"", value))
        return found

    async def _opened(self, org: str, name: str) -> _Opened | None:
        key, now = (org, name), self._clock()
        kept = self._kept.get(key)
        if kept is not None and now - kept[1] < self._cache_seconds:
            return kept[0]
        if self._source is None:
            return None
        opened: _Opened | None = None
        try:
            sealed = await asyncio.to_thread(self._source.secret, org, name)
            if sealed is not None:
                value = self._sealer.open(org, name, sealed.sealed)
                opened = _Opened(
                    Allowlist.parse(sealed.hosts), sealed.header.lower().encode(), value
                )
        except SealedSecretUnreadable as exc:
            self._emit(
                {"event": "secret_unreadable", "org": org, "secret": name, "detail": str(exc)}
            )
        except Exception as exc:  # the store is down: what was read stays in force
            self._emit({"event": "secrets_unavailable", "org": org, "detail": str(exc)})
            return kept[0] if kept is not None else None
        self._kept[key] = (opened, now)
        return opened


@dataclass(frozen=True)
class _Opened:
    hosts: Allowlist
    header: bytes
    value: bytes

    def applies_to(self, host: str, port: int) -> bool:
        return self.hosts.allows(host, port)


def substitute(head: bytes, substitutions: list[Substitution]) -> bytes:
    """``head`` (a request's, up to its blank line) with each placeholder replaced in
    the value of its header, ``Connection: close`` in place of any hop-by-hop
    connection header."""
    lines = head.split(b"\r\n")
    setting = {s.header: s.value for s in substitutions if not s.placeholder}
    kept = [lines[0]]
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        lower = name.strip().lower()
        if not colon:
            continue  # the blank end, re-added below
        if lower in (b"connection", b"keep-alive", b"proxy-connection") or lower in setting:
            continue
        for substitution in substitutions:
            if lower == substitution.header and substitution.placeholder:
                value = value.replace(substitution.placeholder, substitution.value)
        kept.append(name + b":" + value)
    kept += [header + b": " + value for header, value in setting.items()]
    return b"\r\n".join([*kept, b"Connection: close", b"", b""])


def closing(head: bytes) -> bytes:
    """A response's head saying the connection closes after it (the client must not
    send another request down it: that one would not be read)."""
    lines = [
        line
        for line in head.split(b"\r\n")
        if line and line.partition(b":")[0].strip().lower() not in (b"connection", b"keep-alive")
    ]
    return b"\r\n".join([*lines, b"Connection: close", b"", b""])
