"""The tool-catalog layer over HTTP: catalog, execute, executions log (``tools`` scope).

Deciding approvals is ``approvals.py`` (``approve`` scope). ``/execute`` and
``/approvals`` answer tool-style (``{"ok": false, "error"}`` with
status 200) for anything the function itself did wrong, so the agent's turn goes
on; malformed requests are ordinary 4xx errors.
"""

from __future__ import annotations

from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Header, Query

from siesta_contract.agents import AgentConfig
from siesta_contract.functions.knowledge import PreloadedFile
from siesta_contract.tools import (
    CatalogPublic,
    CatalogRequest,
    ExecuteRequest,
    ExecutionOutcome,
    ExecutionsPublic,
    ExecutionStatus,
    SchemaMode,
    SystemToolPublic,
    SystemToolsPublic,
)

from api.deps import CallerDep, OrgDep, ServicesDep, requires
from api.responses import COMMON, error_responses
from api.streaming import SSE_CONTENT, event_stream
from runtime.core.context import check_id
from runtime.core.errors import InvalidConversationId, SiestaError
from runtime.core.records import ExecutionFilter
from runtime.functions.base import strict_schema
from runtime.services import Services
from runtime.tools.call import CallEvents
from runtime.tools.system_tools import Deployment, system_tools

router = APIRouter(
    prefix="/v1/tools",
    tags=["tools"],
    dependencies=requires("tools"),
    responses=error_responses(*COMMON, 400),
)


@router.get("/system")
def list_system_tools(services: ServicesDep) -> SystemToolsPublic:
    """The System Tools this deployment offers, for the agent-configuration form:
    each with its availability here and, when unavailable, why."""
    settings = services.settings
    return SystemToolsPublic(
        systemTools=[
            SystemToolPublic(
                id=entry.tool.id,
                name=entry.tool.name,
                functions=list(entry.tool.functions),
                available=entry.available,
                reason=entry.reason,
                requires=entry.tool.requires,
                assignableBy=list(entry.tool.assignable_by),
            )
            for entry in system_tools(
                Deployment(settings.sandbox, settings.agents, settings.tools),
                services.catalog,
            )
        ]
    )


@router.post("/catalog")
def catalog(
    body: CatalogRequest,
    services: ServicesDep,
    caller: CallerDep,
    schema_mode: Annotated[
        SchemaMode,
        Query(
            alias="schemaMode",
            description="`strict`: each function's parameters in the strict form of "
            "function calling (OpenAI `strict: true`): every property required, the "
            "optional ones nullable (`null` is read as not given), no other properties.",
        ),
    ] = "standard",
) -> CatalogPublic:
    """The functions an agent gets for a user of the body's ``org`` (one the token
    allows): the org's policies always apply (a catalog is never org-less)."""
    org = caller.org_for(body.org, "org")
    caller.user_for(body.user.id)
    agent = services.agents.as_registered(org, body.agent)
    result = services.tool_catalog(agent, body.user, org)
    functions = [f.public() for f in result.functions]
    if schema_mode == "strict":
        functions = [{**f, "parameters": strict_schema(f["parameters"])} for f in functions]
    preloaded = preloaded_files(services, agent, org)
    return CatalogPublic.model_validate(
        {"functions": functions, "notes": result.notes, "preloadedFiles": preloaded}
    )


def preloaded_files(services: Services, agent: AgentConfig, org: str) -> list[PreloadedFile]:
    """The agent's files to put into context (the ``direct`` strategy): those that fit
    the budget, smallest first (none when they cannot be read: the notes say why)."""
    files = agent.files
    if files is None or files.strategy != "direct":
        return []
    try:
        fitting, _ = services.knowledge.preload_plan(org, files.knowledge_base_id)
        texts = [services.knowledge.text(org, v.version_id) for v in fitting]
    except SiestaError:
        return []
    return [
        PreloadedFile(
            source_connection_content_version_id=version.version_id,
            name=version.name,
            text=text,
        )
        for version, text in texts
    ]


@router.post(
    "/execute",
    response_model=ExecutionOutcome,
    response_model_exclude_unset=True,
    responses={
        200: {
            "description": "The call's outcome. With `Accept: text/event-stream`: `status` "
            'events (`{"message": ...}`, a script\'s `logStatus`) and `output` events (a '
            "command's chunks) as they happen, then one `result` event with this body.",
            "content": SSE_CONTENT,
        }
    },
)
async def execute(
    body: ExecuteRequest,
    services: ServicesDep,
    caller: CallerDep,
    org: OrgDep,
    accept: Annotated[str | None, Header()] = None,
) -> Any:
    check_id(body.conversationId, "conversationId", InvalidConversationId)
    caller.user_for(body.user.id)
    agent = services.agents.as_registered(org, body.agent)

    def run(events: CallEvents | None = None) -> dict[str, Any]:
        outcome = services.tools.execute(
            org,
            body.conversationId,
            agent,
            body.user,
            body.function,
            body.arguments,
            requested_by=caller.name,
            events=events,
            message=body.messageId,
        )
        return ExecutionOutcome.model_validate(outcome).model_dump(mode="json", exclude_unset=True)

    if "text/event-stream" in (accept or ""):
        keepalive = services.settings.http.sse_keepalive_seconds
        return event_stream(lambda events: ("result", run(events)), keepalive)
    return await to_thread.run_sync(run)


@router.get("/executions")
def executions(
    services: ServicesDep,
    org: OrgDep,
    conversation_id: Annotated[str | None, Query(alias="conversationId")] = None,
    agent_id: Annotated[str | None, Query(alias="agentId")] = None,
    function: str | None = None,
    status: ExecutionStatus | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ExecutionsPublic:
    where = ExecutionFilter(conversation_id, agent_id, function, status, since, until, limit)
    found = services.tools.find(org, where)
    return ExecutionsPublic.model_validate(
        {"executions": [execution.public() for execution in found]}
    )
