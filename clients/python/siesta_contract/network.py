"""A conversation's own network rules (``/v1/conversations/{id}/sandbox/network``): a
narrowing of the deployment's egress allowlist, never a widening."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from siesta_contract.secrets import MAX_BINDINGS, SecretBindingPublic, SecretBindingSpec
from siesta_contract.text import NETWORK_ENTRY

MAX_NETWORK_ENTRIES = 256
NetworkEntry = Annotated[str, Field(pattern=f"^{NETWORK_ENTRY}$", max_length=300)]
"""``name``, ``*.suffix``, an address or a CIDR range, any with ``:port``, as in
``SIESTA_EGRESS__ALLOW``."""


class SandboxNetworkUpdate(BaseModel):
    """The rules, replaced as a whole; they apply to the sandbox's next connections
    (running processes included) within a couple of seconds."""

    model_config = ConfigDict(extra="forbid")

    allow: Annotated[list[NetworkEntry], Field(max_length=MAX_NETWORK_ENTRIES)] | None = None
    """Only these hosts and addresses (each within the deployment's allowlist, else 403
    ``network_rule_outside_allowlist``); ``null``: the deployment's whole list."""
    deny: Annotated[list[NetworkEntry], Field(max_length=MAX_NETWORK_ENTRIES)] = Field(
        default_factory=list
    )
    """Taken away from what ``allow`` (or the deployment) lets through."""
    internet: bool = True
    """``false``: no network at all, whatever the lists say."""
    secrets: Annotated[list[SecretBindingSpec], Field(max_length=MAX_BINDINGS)] = Field(
        default_factory=list
    )
    """The org's secrets offered to the sandbox, each as a placeholder in its
    environment that the egress proxy replaces, for the hosts named only."""


class EgressRefusalsPublic(BaseModel):
    count: int
    """Requests of this sandbox the egress proxies refused (403), counted until
    ``SIESTA_EGRESS__REFUSAL_RETENTION_SECONDS`` (a day) after the last one."""
    lastHost: str
    lastReason: str
    """Why: ``not_in_sandbox_allow``, ``sandbox_deny``, ``internet_off`` (these rules),
    ``host_not_allowed`` (the deployment's or the agent's list), ``address_not_allowed``,
    ``ip_literal``."""
    lastAt: float
    """Unix seconds."""


class SandboxNetworkPublic(BaseModel):
    allow: list[str] | None
    deny: list[str]
    internet: bool
    deployment: list[str]
    """The deployment's allowlist these rules narrow (empty: sandboxes have no network)."""
    effective: list[str]
    """What remains reachable: the allowed entries that no deny entry wholly covers
    (a deny entry covering part of one, such as a name below a wildcard, applies too).
    An agent's own narrowing (``X-Siesta-Egress-Allow``) applies on top, per call."""
    refusals: EgressRefusalsPublic | None
    """Refused requests of this sandbox, ``null`` when none (recently)."""
    secrets: list[SecretBindingPublic] = Field(default_factory=list)
    """The secrets offered, with the placeholder each environment variable holds."""
