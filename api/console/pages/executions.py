"""The executions log searched (every org's, or one's) and one execution in full."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from siesta_contract.tools import ExecutionStatus

from api.console.auth import PageSession
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from runtime.core.records import ExecutionFilter

STATUSES = [status.value for status in ExecutionStatus]
Filter = Annotated[str, Query(max_length=200)]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(f"{PREFIX}/executions")
def executions(
    services: ServicesDep,
    session: PageSession,
    org: Filter = "",
    conversation: Filter = "",
    agent: Filter = "",
    function: Filter = "",
    status: Filter = "",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> HTMLResponse:
    filters = {
        "org": org.strip(),
        "conversation": conversation.strip(),
        "agent": agent.strip(),
        "function": function.strip(),
        "status": status if status in STATUSES else "",
    }
    where = ExecutionFilter(
        conversation=filters["conversation"] or None,
        agent_id=filters["agent"] or None,
        function=filters["function"] or None,
        status=ExecutionStatus(filters["status"]) if filters["status"] else None,
        limit=limit,
    )
    found = services.tools.find(filters["org"] or None, where)
    return render(
        session,
        "executions.html",
        page="executions",
        executions=found,
        filters=filters,
        statuses=STATUSES,
        limit=limit,
    )


@router.get(f"{PREFIX}/executions/{{org}}/{{execution_id}}")
def execution(
    org: str, execution_id: str, services: ServicesDep, session: PageSession
) -> HTMLResponse:
    found = services.tools.get(org, execution_id)
    if found is None:
        return render(
            session,
            "missing.html",
            page="executions",
            status=404,
            what=f"No execution {execution_id} in the org {org}.",
        )
    return render(
        session, "execution.html", page="executions", execution=found, public=found.public()
    )
