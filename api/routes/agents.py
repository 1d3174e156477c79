"""Registered agents: the ``tools`` scope (the agent backend's, which sends the same
configuration to ``/v1/tools/execute``).

A call on a direct route (``/v1/conversations/{id}/sandbox/*``, ``/js``, ``/mcp``)
carries headers, not the agent's configuration. Registering it (``POST /v1/agents``) makes every
call whose ``X-Siesta-Agent`` names the agent run under it: its ``functionPolicies``,
its System Tools and its org's rules, exactly as ``/v1/tools/execute`` applies them
(``runtime/tools/agent_registry.py``). Agents belong to the org (``X-Siesta-Org``):
another org's answer 404 as if they did not exist.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Response

from siesta_contract.agents import (
    AgentConfig,
    AgentRegistration,
    RegisteredAgentPublic,
    RegisteredAgentsPublic,
)

from api.deps import CallerDep, OrgDep, ServicesDep, requires
from api.responses import COMMON, error_responses
from runtime.core.records import AgentRecord

router = APIRouter(
    prefix="/v1/agents",
    tags=["agents"],
    dependencies=requires("tools"),
    responses=error_responses(*COMMON, 404, 409),
)


@router.get("")
async def list_agents(services: ServicesDep, org: OrgDep) -> RegisteredAgentsPublic:
    """The org's registered agents, by id."""
    found = await to_thread.run_sync(lambda: services.agents.list(org))
    return RegisteredAgentsPublic(agents=[public(record) for record in found])


@router.post("")
async def register_agent(
    body: AgentRegistration,
    services: ServicesDep,
    caller: CallerDep,
    org: OrgDep,
) -> RegisteredAgentPublic:
    """Register the agent's configuration (the catalog's ``agent`` body), or replace
    the one of the same ``id``: calls that name it from now on run under this one.
    409 ``agent_limit_reached`` at ``SIESTA_TOOLS__MAX_REGISTERED_AGENTS`` per org."""
    record = await to_thread.run_sync(lambda: services.agents.put(org, body, caller.name))
    return public(record)


@router.get("/{agent_id}")
async def get_agent(agent_id: str, services: ServicesDep, org: OrgDep) -> RegisteredAgentPublic:
    return public(await to_thread.run_sync(lambda: services.agents.get(org, agent_id)))


@router.delete("/{agent_id}", status_code=204)
async def delete_agent(agent_id: str, services: ServicesDep, org: OrgDep) -> Response:
    """Forget the registration: calls that name the agent get the deployment's and
    org's floors again (held calls keep the configuration they were held under)."""
    await to_thread.run_sync(lambda: services.agents.delete(org, agent_id))
    return Response(status_code=204)


def public(record: AgentRecord) -> RegisteredAgentPublic:
    return RegisteredAgentPublic(
        agent=AgentConfig.model_validate(record.config),
        updatedAt=record.updated_at,
        updatedBy=record.updated_by,
    )
