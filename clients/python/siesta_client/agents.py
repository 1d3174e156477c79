"""An org's registered agents, for both clients (``client.agents``): calls that name
one (``X-Siesta-Agent``) on the direct routes, ``/js`` and ``/mcp`` run under its
configuration."""

from __future__ import annotations

from typing import Any

from siesta_contract.agents import AgentConfig, RegisteredAgentPublic, RegisteredAgentsPublic

from siesta_client import _calls
from siesta_client._ops import AsyncCaller, Caller


class Agents:
    """An org's registered agents: calls that name one (``X-Siesta-Agent``) on the
    direct routes, ``/js`` and ``/mcp`` run under its configuration."""

    def __init__(self, client: Caller) -> None:
        self.client = client

    def register(self, agent: AgentConfig | dict[str, Any], *, org: str) -> RegisteredAgentPublic:
        """Register the agent's configuration, or replace it (by its ``id``)."""
        return self.client.call(_calls.register_agent(org, agent))

    def list(self, *, org: str) -> RegisteredAgentsPublic:
        return self.client.call(_calls.agents(org))

    def get(self, agent_id: str, *, org: str) -> RegisteredAgentPublic:
        return self.client.call(_calls.agent(org, agent_id))

    def delete(self, agent_id: str, *, org: str) -> None:
        """Forget it: calls that name it get the deployment's and org's floors again."""
        self.client.call(_calls.delete_agent(org, agent_id))


class AsyncAgents:
    """An org's registered agents: calls that name one (``X-Siesta-Agent``) on the
    direct routes, ``/js`` and ``/mcp`` run under its configuration."""

    def __init__(self, client: AsyncCaller) -> None:
        self.client = client

    async def register(
        self, agent: AgentConfig | dict[str, Any], *, org: str
    ) -> RegisteredAgentPublic:
        """Register the agent's configuration, or replace it (by its ``id``)."""
        return await self.client.call(_calls.register_agent(org, agent))

    async def list(self, *, org: str) -> RegisteredAgentsPublic:
        return await self.client.call(_calls.agents(org))

    async def get(self, agent_id: str, *, org: str) -> RegisteredAgentPublic:
        return await self.client.call(_calls.agent(org, agent_id))

    async def delete(self, agent_id: str, *, org: str) -> None:
        """Forget it: calls that name it get the deployment's and org's floors again."""
        await self.client.call(_calls.delete_agent(org, agent_id))
