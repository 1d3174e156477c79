"""What governs a call on a direct route (``/sandbox/*``, ``/js``, ``/mcp``).

A call that names a registered agent (``ctx.agent_config``, see
``agent_registry.py``) runs under that agent's ``functionPolicies`` and only within
its System Tools, as its catalog has them: the same ``effective_policy`` and the same
catalog ``/v1/tools/execute`` uses for the configuration in its body. Any other gets
the org's and deployment's floors over the reference's defaults. Direct routes serve
no role-gated function, so the catalog is built for a ``User``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from siesta_contract.agents import AgentConfig, Policy, UserInfo

from runtime.core.context import CallContext
from runtime.core.errors import FunctionNotAvailable
from runtime.tools.catalog import Catalog
from runtime.tools.policy import EffectivePolicy, effective_policy

CatalogFor = Callable[[AgentConfig, UserInfo, str], Catalog]
"""The catalog of an agent for a user of an org (``Services.tool_catalog``)."""
OrgFloor = Callable[[str, str | None], Mapping[str, Policy]]
"""An org's floor as it holds for a stated agent (``Services.org_floor``: lifted only
for an agent the org registered)."""


class DirectPolicies:
    def __init__(
        self, catalog_for: CatalogFor, deployment: Mapping[str, Policy], org_floor: OrgFloor
    ) -> None:
        self._catalog_for = catalog_for
        self._deployment = deployment
        self._org_floor = org_floor

    def policy(
        self, ctx: CallContext, function: str, tool: str, catalog: Catalog | None = None
    ) -> EffectivePolicy:
        """The policy a call of ``function`` (of the System Tool ``tool``) runs under;
        ``FunctionNotAvailable`` when it may not run at all."""
        registered = ctx.agent_config
        rule = effective_policy(
            function,
            system=True,
            agent=registered.function_policies.get(function) if registered else None,
            deployment=self._deployment,
            organization=self._org_floor(ctx.org, ctx.agent),
        )
        if rule.policy == "disabled":
            msg = f"{function} is disabled for this caller ({rule.reason})"
            raise FunctionNotAvailable(msg)
        if registered is not None:
            _require_tool(catalog or self.catalog(ctx, registered), registered, function, tool)
        return rule

    def available(self, ctx: CallContext, functions: Mapping[str, str]) -> list[str]:
        """Of ``functions`` (name → System Tool), those the caller may call, for a
        listing (MCP's ``tools/list``): one catalog for them all."""
        registered = ctx.agent_config
        catalog = self.catalog(ctx, registered) if registered is not None else None
        found = []
        for function, tool in functions.items():
            try:
                self.policy(ctx, function, tool, catalog)
            except FunctionNotAvailable:
                continue
            found.append(function)
        return found

    def catalog(self, ctx: CallContext, agent: AgentConfig) -> Catalog:
        return self._catalog_for(agent, UserInfo(id=ctx.user, role="User"), ctx.org)


def _require_tool(catalog: Catalog, agent: AgentConfig, function: str, tool: str) -> None:
    """Refuse a registered agent's call of a System Tool its catalog does not give it
    (not assigned, or not available here: the catalog's notes say why)."""
    if any(entry.source == f"system:{tool}" for entry in catalog.functions):
        return
    why = "; ".join(note for note in catalog.notes if tool in note.lower()) or (
        f"{tool} is not among its systemToolIds"
    )
    msg = f"{function} is not available to the registered agent {agent.id!r}: {why}"
    raise FunctionNotAvailable(msg)
