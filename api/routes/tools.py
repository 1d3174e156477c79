"""The tool-catalog layer over HTTP: catalog, execute, approvals, executions log.

``/execute`` and ``/approvals`` answer tool-style (``{"ok": false, "error"}`` with
status 200) for anything the function itself did wrong, so the agent's turn goes
on; malformed requests are ordinary 4xx errors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from anyio import to_thread
from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from api.deps import Authenticated, ServicesDep
from runtime.context import check_id
from runtime.errors import InvalidRequest, NotFound
from runtime.store.records import ExecutionFilter, ExecutionStatus
from runtime.tools.models import AgentConfig, UserInfo

router = APIRouter(prefix="/v1/tools", tags=["tools"], dependencies=Authenticated)


class CatalogRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: AgentConfig
    user: UserInfo


class ExecuteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversationId: str
    agent: AgentConfig
    user: UserInfo
    function: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    by: str = Field(min_length=1)
    """The person who decided (recorded with the execution)."""


def _org(x_siesta_org: str | None) -> str:
    if not x_siesta_org:
        msg = "tool routes need the X-Siesta-Org header"
        raise InvalidRequest(msg, code="missing_context", headers=["X-Siesta-Org"])
    return check_id(x_siesta_org, "organisation id (X-Siesta-Org)", "invalid_context")


OrgHeader = Annotated[str | None, Header()]


@router.post("/catalog")
def catalog(body: CatalogRequest, services: ServicesDep) -> dict[str, Any]:
    result = services.tool_catalog(body.agent, body.user)
    return {"functions": [f.public() for f in result.functions], "notes": result.notes}


@router.post("/execute")
async def execute(
    body: ExecuteRequest, services: ServicesDep, x_siesta_org: OrgHeader = None
) -> dict[str, Any]:
    org = _org(x_siesta_org)
    check_id(body.conversationId, "conversationId", "invalid_conversation_id")
    result: dict[str, Any] = await to_thread.run_sync(
        lambda: services.tools.execute(
            org, body.conversationId, body.agent, body.user, body.function, body.arguments
        )
    )
    return result


@router.post("/approvals/{approval_id}", response_model=None)
async def decide(
    approval_id: str, body: Decision, services: ServicesDep, x_siesta_org: OrgHeader = None
) -> dict[str, Any] | JSONResponse:
    org = _org(x_siesta_org)
    result = await to_thread.run_sync(
        lambda: services.tools.decide(org, approval_id, body.decision == "approve", body.by)
    )
    if result is not None:
        return result
    execution = services.tools.get(org, approval_id)
    if execution is None:
        msg = f"no approval {approval_id!r}"
        raise NotFound(msg)
    # A replay: the decision was made already and nothing runs again.
    return JSONResponse(
        status_code=409,
        content={
            "error": {
                "code": "approval_already_decided",
                "message": f"approval {approval_id} was decided already ({execution.status.value})",
                "execution": execution.public(),
            }
        },
    )


@router.get("/executions")
def executions(
    services: ServicesDep,
    x_siesta_org: OrgHeader = None,
    conversation_id: Annotated[str | None, Query(alias="conversationId")] = None,
    agent_id: Annotated[str | None, Query(alias="agentId")] = None,
    function: str | None = None,
    status: ExecutionStatus | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    where = ExecutionFilter(conversation_id, agent_id, function, status, since, until, limit)
    found = services.tools.find(_org(x_siesta_org), where)
    return {"executions": [execution.public() for execution in found]}
