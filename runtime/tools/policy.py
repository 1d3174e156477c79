"""The policy a function runs under, and why: ``enabled``, ``confirm`` or ``disabled``.

The reference (seeds/000, "Connections"): "Require confirmation for send,
publish, create, update, delete, permission, financial, or production-impacting
actions." A connection function's default comes from its name and what it declares
(MCP-style ``annotations``): one whose name names such an action asks first, whatever
it declares — a declaration may tighten a default, never loosen it, so
``Gmail.SendEmail`` with ``readOnlyHint`` true still asks (the operator or the agent
can still say ``enabled`` for it); otherwise ``readOnlyHint`` true runs at once and
false asks first; undeclared, one whose name names a read (``Gmail.ReadEmail``,
``Drive.ListFiles``) runs at once, and one whose name says neither (``crm_op_17``,
``Jira.Issue``) asks first. Three layers decide, in this order:

1. the agent's configuration (``functionPolicies`` for System Tool functions, a
   connection function's own ``policy``) — it may relax the default;
2. the organization's policy (``SIESTA_TOOLS__ORG_POLICIES``), then the deployment's
   ``SIESTA_TOOLS__FUNCTION_POLICIES`` — used when the agent says nothing, and floors
   the agent cannot go below (an operator's ``runCommand: confirm`` holds for every
   agent and every route; an org's holds for its agents, except those it registered
   and trusts with the function);
3. the reference's rule above.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from siesta_contract.agents import Policy, ToolAnnotations

STRICTNESS: dict[Policy, int] = {"enabled": 0, "confirm": 1, "disabled": 2}

CONFIRMED_SYSTEM_FUNCTIONS = frozenset({"publishFiles", "image_generation"})
"""System functions that publish or create for the user beyond the sandbox."""
OWN_MEMORY_WRITES = frozenset({"add_memory", "add_chat_turn"})
"""System functions whose names say "create" (``add``) but that only write to the org's
own memory banks, which is what the tool is for: asking a person before each remembered
fact would defeat it. They run at once; an operator who wants otherwise says so
(``FUNCTION_POLICIES``, or a bank in ``read_only`` mode)."""

ACTIONS: dict[str, str] = {
    "send": "send reply forward notify respond submit",
    "publish": "publish post tweet announce broadcast",
    "create": "create add insert append upload copy duplicate schedule",
    "update": "update edit modify patch set write upsert replace rename move mark assign "
    "transition close reopen",
    "delete": "delete remove trash archive cancel purge clear erase destroy",
    "permission": "grant revoke permission permissions share unshare invite",
    "financial": "pay payment charge refund transfer invoice purchase payout",
    "production-impacting": "deploy release merge rollback restart reboot terminate shutdown "
    "scale migrate",
}
"""The reference's kinds of consequential action, and the words in a function's
name that say it does one (whole words only: ``Drive.ListSharedFiles`` shares
nothing; table-tested)."""
ACTION_WORDS: dict[str, str] = {
    word: action for action, words in ACTIONS.items() for word in words.split()
}
READ_WORDS = frozenset(
    [
        "get",
        "list",
        "read",
        "search",
        "find",
        "fetch",
        "query",
        "lookup",
        "view",
        "show",
        "describe",
        "count",
        "retrieve",
        "inspect",
        "preview",
        "browse",
        "download",
    ]
)
"""Words in a function's name that say it reads (whole words, after the actions: a
name that names an action and a read, ``SearchAndDelete``, is an action)."""

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def name_words(name: str) -> list[str]:
    """``Gmail.SendEmail`` → ``["gmail", "send", "email"]``; ``create_issue`` → two words."""
    return [word.lower() for word in _WORD.findall(name)]


def _local_words(name: str) -> list[str]:
    local = name.rsplit(".", 1)[-1]  # "Gmail.Send": the service's name is not the action
    return name_words(local.removeprefix("Platform_"))


def action_of(name: str) -> str | None:
    """The consequential action a function's name names, if any."""
    return next((ACTION_WORDS[w] for w in _local_words(name) if w in ACTION_WORDS), None)


def says_it_reads(name: str) -> bool:
    """Whether a function's name names a read (and no action)."""
    return action_of(name) is None and any(w in READ_WORDS for w in _local_words(name))


@dataclass(frozen=True)
class EffectivePolicy:
    policy: Policy
    reason: str


def default_policy(
    name: str, *, system: bool, annotations: ToolAnnotations | None = None
) -> EffectivePolicy:
    """The rule for a function nobody configured: for ours, what each does; for a
    connection's, what it declares unless that loosens an action its name names, else
    what its name says, else ask first."""
    if system and name in CONFIRMED_SYSTEM_FUNCTIONS:
        return EffectivePolicy("confirm", f"default: {name} publishes or creates for the user")
    if system and name in OWN_MEMORY_WRITES:
        return EffectivePolicy("enabled", "default: writes only to the org's own memory banks")
    if system and not name.startswith("Platform_"):
        return EffectivePolicy("enabled", "default")
    action = action_of(name)
    if not system and annotations is not None and annotations.read_only is not None:
        if not annotations.read_only:
            harm = "may destroy" if annotations.destructive is not False else "changes things"
            return EffectivePolicy(
                "confirm", f"default: declared not read-only (readOnlyHint false; it {harm})"
            )
        if action is None:
            return EffectivePolicy("enabled", "default: declared read-only (readOnlyHint)")
        # The declaration is the connection's word; the name is what the model and the
        # person see. A server that calls a send read-only is wrong or lying, and a
        # person would not expect it to go out unasked.
        return EffectivePolicy(
            "confirm",
            f"default: {action} actions need confirmation (its name names an action; "
            "readOnlyHint true cannot loosen that)",
        )
    if action is not None:
        return EffectivePolicy("confirm", f"default: {action} actions need confirmation")
    if system:
        return EffectivePolicy("enabled", "default")
    if says_it_reads(name):
        return EffectivePolicy("enabled", "default: its name says it reads")
    return EffectivePolicy(
        "confirm",
        "default: neither declared read-only (readOnlyHint) nor named as a read, so it asks first",
    )


def effective_policy(
    name: str,
    *,
    system: bool,
    agent: Policy | None,
    deployment: Mapping[str, Policy],
    annotations: ToolAnnotations | None = None,
    organization: Mapping[str, Policy] | None = None,
) -> EffectivePolicy:
    """The policy ``name`` runs under: the agent's, else the organization's, else the
    deployment's, else the default — never below the organization's or the
    deployment's."""
    floors = [
        (floor, whose)
        for floor, whose in (
            ((organization or {}).get(name), "the organization's policy"),
            (deployment.get(name), "the deployment's policy"),
        )
        if floor is not None
    ]
    if agent is not None:
        chosen = EffectivePolicy(agent, "the agent's configuration")
    elif floors:
        chosen = EffectivePolicy(*floors[0])
    else:
        chosen = default_policy(name, system=system, annotations=annotations)
    strictest = max(floors, key=lambda f: STRICTNESS[f[0]], default=None)
    if strictest is not None and STRICTNESS[strictest[0]] > STRICTNESS[chosen.policy]:
        asked = f"the agent asked for {agent}" if agent else f"{chosen.reason}: {chosen.policy}"
        return EffectivePolicy(strictest[0], f"{strictest[1]} ({asked})")
    return chosen
