"""Agents registered per org, and the calls that name one.

The agent backend sends an agent's configuration in the body of
``/v1/tools/execute``; the direct routes (``/sandbox/*``, ``/js``, ``/mcp``) carry
only headers. Registering the configuration (``POST /v1/agents``) lets those
routes apply the same policies, System Tool assignment and org rules: a call whose
``X-Siesta-Agent`` names a registered agent runs under it (``bind``). A name that
is not registered keeps the old behaviour — the deployment's and org's floors and
the reference's defaults — so backends that register nothing are not broken; but
only a registered agent is one the org's policy may trust (``registered``).

The agent's base image, egress allowlist and sub-agents come from its
registration; a header may repeat one but not contradict it (``invalid_context``):
two sources disagreeing about what the agent may do is a bug in the caller, and
picking one silently would hide it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from siesta_contract.agents import AgentConfig

from runtime.core.context import CallContext, check_id
from runtime.core.errors import InvalidContext, InvalidRequest, NotFound, SiestaError
from runtime.core.records import AgentRecord
from runtime.seams.stores import AgentStore


class AgentLimitReached(SiestaError):
    code = "agent_limit_reached"


class AgentRegistry:
    def __init__(
        self, store: AgentStore, limit: int, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._limit = limit
        self._clock = clock

    def put(self, org: str, config: AgentConfig, by: str) -> AgentRecord:
        """Register (or replace) the org's agent ``config.id``."""
        check_id(config.id, "agent id", InvalidRequest)
        record = AgentRecord(
            org=org,
            agent_id=config.id,
            config=config.model_dump(mode="json", by_alias=True, exclude_none=True),
            updated_at=self._clock(),
            updated_by=by,
        )
        if not self._store.put_agent(record, self._limit):
            msg = (
                f"the org has registered {self._limit} agents, its limit "
                "(SIESTA_TOOLS__MAX_REGISTERED_AGENTS): delete one first"
            )
            raise AgentLimitReached(msg, limit=self._limit)
        return record

    def get(self, org: str, agent_id: str) -> AgentRecord:
        record = self._store.get_agent(org, agent_id)
        if record is None:
            msg = f"no registered agent {agent_id!r} in this org"
            raise NotFound(msg)
        return record

    def list(self, org: str) -> list[AgentRecord]:
        return self._store.list_agents(org)

    def delete(self, org: str, agent_id: str) -> None:
        if not self._store.delete_agent(org, agent_id):
            msg = f"no registered agent {agent_id!r} in this org"
            raise NotFound(msg)

    def as_registered(self, org: str, agent: AgentConfig) -> AgentConfig:
        """The configuration a call stating ``agent`` runs under: the org's registered
        agent of that id when there is one (a body cannot loosen its policies), else
        the one stated."""
        record = self._store.get_agent(org, agent.id)
        return agent if record is None else AgentConfig.model_validate(record.config)

    def registered(self, org: str | None, agent_id: str | None) -> str | None:
        """``agent_id`` if ``org`` has registered it, else ``None``. What an org trusts
        (``trustedAgents``) is its registered agents: an id is only a claim until the
        org's ``tools`` token registers it, and any caller can state one."""
        if org is None or agent_id is None or self._store.get_agent(org, agent_id) is None:
            return None
        return agent_id

    def bind(self, ctx: CallContext) -> CallContext:
        """``ctx`` under its registered agent, if ``X-Siesta-Agent`` names one (else as
        it is): the agent's configuration rides along for the executor's policies, and
        its base image, egress allowlist and sub-agents fill in what the headers left
        out."""
        if ctx.agent is None:
            return ctx
        record = self._store.get_agent(ctx.org, ctx.agent)
        if record is None:
            return ctx
        agent = AgentConfig.model_validate(record.config)
        registered = tuple(agent.egress_allow) if agent.egress_allow is not None else None
        _agree("X-Siesta-Base-Image", ctx.base_image, agent.base_image, agent.id)
        _agree("X-Siesta-Egress-Allow", ctx.egress_allow, registered, agent.id)
        _agree(
            "X-Siesta-Sub-Agents", ctx.sub_agents or None, tuple(agent.sub_agents) or None, agent.id
        )
        base_image = ctx.base_image or agent.base_image
        egress = ctx.egress_allow if ctx.egress_allow is not None else registered
        sub_agents = ctx.sub_agents or tuple(agent.sub_agents)
        effective = agent.model_copy(
            update={
                "base_image": base_image,
                "egress_allow": list(egress) if egress is not None else None,
                "sub_agents": list(sub_agents),
            }
        )
        return dataclasses.replace(  # a new context: its egress allowlist is checked again
            ctx,
            base_image=base_image,
            egress_allow=egress,
            sub_agents=sub_agents,
            agent_config=effective,
        )


def _agree(header: str, given: object, registered: object, agent: str) -> None:
    if given is not None and registered is not None and _same(given) != _same(registered):
        msg = (
            f"{header} {given!r} contradicts the registered agent {agent!r}, "
            f"which says {registered!r}: send it as registered, or leave the header out"
        )
        raise InvalidContext(msg)


def _same(value: object) -> object:
    """Lists compare as sets (the order of hosts or sub-agents means nothing)."""
    return frozenset(value) if isinstance(value, tuple) else value
