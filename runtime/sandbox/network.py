"""A conversation's own network rules: set, read, and what its sandbox was refused.

The rules narrow what the deployment's list (``SIESTA_EGRESS__ALLOW``) and the
agent's (``X-Siesta-Egress-Allow``) let through: ``allow`` keeps only the hosts and
addresses it lists, ``deny`` takes them away (on every port, unless an entry names
one), ``internet=False`` takes everything. They never
widen: an ``allow`` entry that would reach anything outside the deployment's list
is refused when it is set (``network_rule_outside_allowlist``, naming the list),
not kept and quietly ignored, so what a user reads back is what applies.

They live in the store, keyed by org and conversation, so they can be set before
or after the sandbox exists, and every egress proxy reads them there
(``runtime/egress/sandbox_rules.py``: a change reaches running sandboxes within
``SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS``). Deleting the conversation forgets
them.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.addresses import ANY_PORT
from runtime.core.context import CallContext
from runtime.core.errors import Forbidden, InvalidRequest
from runtime.core.network_rules import (
    Allowlist,
    EgressRefusals,
    NetworkRules,
    covers,
    outside,
    parse_entry,
)
from runtime.seams.stores import NetworkRuleStore

MAX_ENTRIES = 256
"""Entries in ``allow`` or ``deny``: every connection of the sandbox checks them."""


class InvalidNetworkRule(InvalidRequest):
    code = "invalid_network_rule"


class NetworkRuleOutsideAllowlist(Forbidden):
    """Well formed, and forbidden by the deployment: its allowlist is the widest."""

    code = "network_rule_outside_allowlist"


@dataclass(frozen=True)
class NetworkView:
    """The rules in force for a conversation and what they narrow."""

    rules: NetworkRules
    deployment: tuple[str, ...]
    effective: tuple[str, ...]
    """What remains reachable: the allowed entries no deny entry wholly covers (deny
    entries that cover part of one, such as a name below a wildcard, apply on top)."""
    refusals: EgressRefusals | None


class SandboxNetwork:
    def __init__(self, store: NetworkRuleStore, deployment: Allowlist) -> None:
        self._store = store
        self._deployment = deployment

    def checked(
        self,
        allow: list[str] | None,
        deny: list[str],
        internet: bool,
        exempt: list[str] | tuple[str, ...] = (),
    ) -> NetworkRules:
        """Rules from a request, or the 4xx that says what is wrong with them."""
        for name, entries in (("allow", allow or []), ("deny", deny), ("exempt", exempt)):
            if len(entries) > MAX_ENTRIES:
                msg = f"{name} lists {len(entries)} entries; at most {MAX_ENTRIES}"
                raise InvalidNetworkRule(msg, limit=MAX_ENTRIES)
            for entry in entries:
                try:
                    parse_entry(entry)
                except ValueError as exc:
                    raise InvalidNetworkRule(str(exc), entry=entry) from exc
        wider = outside(self._deployment, allow or [])
        if wider:
            msg = (
                f"{', '.join(wider)}: outside the deployment's egress allowlist "
                f"({self._deployment}); a sandbox's rules can only narrow it"
            )
            raise NetworkRuleOutsideAllowlist(
                msg, entries=wider, allowlist=[str(r) for r in self._deployment.rules]
            )
        return NetworkRules(
            tuple(allow) if allow is not None else None,
            tuple(dict.fromkeys(deny)),
            internet,
            exempt=tuple(dict.fromkeys(exempt)),
        )

    def set(self, ctx: CallContext, rules: NetworkRules) -> NetworkView:
        self._store.set_network_rules(ctx.org, ctx.conversation, rules)
        return self.view(ctx)

    def view(self, ctx: CallContext) -> NetworkView:
        rules = self._store.network_rules(ctx.org, ctx.conversation) or NetworkRules()
        return NetworkView(
            rules,
            tuple(str(rule) for rule in self._deployment.rules),
            self._effective(rules),
            self.refusals(ctx.org, ctx.conversation),
        )

    def refusals(self, org: str, conversation: str) -> EgressRefusals | None:
        """How many of the conversation's requests egress proxies refused (recently),
        and the last one: for its sandbox's metrics."""
        return self._store.egress_refusals(org, conversation)

    def refusal_count(self, ctx: CallContext) -> int:
        """The sandbox metrics' ``egressRefusals``: 0 when nothing was refused lately."""
        refusals = self.refusals(ctx.org, ctx.conversation)
        return refusals.count if refusals is not None else 0

    def forget(self, org: str, conversation: str) -> None:
        self._store.forget_network(org, conversation)

    def _effective(self, rules: NetworkRules) -> tuple[str, ...]:
        if not rules.internet:
            return ()
        allowed = Allowlist.parse(rules.allow) if rules.allow is not None else self._deployment
        denied = Allowlist.parse(rules.deny, ANY_PORT).rules
        exempt = Allowlist.parse(rules.exempt, ANY_PORT).rules
        return tuple(
            str(rule)
            for rule in allowed.rules
            if not any(covers(deny, rule) for deny in denied)
            or any(covers(kept, rule) for kept in exempt)
        )
