"""Calls waiting for approval, every org's, with their complete arguments; approved or
denied through the service ``POST /v1/tools/approvals/{id}`` uses, the console's user
(its token's name) deciding."""

from __future__ import annotations

import time
from typing import Annotated
from urllib.parse import urlencode

from anyio import to_thread
from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from siesta_contract.tools import ExecutionStatus

from api.console.audit_hook import record_action
from api.console.auth import ActionSession, PageSession, source_of
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from api.errors import status_for
from runtime.core.errors import SiestaError
from runtime.core.records import ExecutionFilter
from runtime.tools.approval_view import approval_view

LIMIT = 100

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(f"{PREFIX}/approvals")
def approvals(
    services: ServicesDep,
    session: PageSession,
    done: Annotated[str, Query(max_length=20)] = "",
    target: Annotated[str, Query(max_length=200)] = "",
) -> HTMLResponse:
    return _page(services, session, done=done, target=target)


def _page(
    services: ServicesDep,
    session: ActionSession,
    *,
    status: int = 200,
    error: SiestaError | None = None,
    done: str = "",
    target: str = "",
) -> HTMLResponse:
    now = time.time()
    pending = services.tools.find(
        None, ExecutionFilter(status=ExecutionStatus.PENDING_APPROVAL, limit=LIMIT)
    )
    waiting = sorted((e for e in pending if not e.expired(now)), key=lambda e: e.created_at)
    return render(
        session,
        "approvals.html",
        page="approvals",
        status=status,
        approvals=[(e.org, approval_view(e, complete=True)) for e in waiting],
        error=error,
        done=done if done in ("approved", "denied") else "",
        target=target,
    )


@router.post(f"{PREFIX}/approvals/{{org}}/{{approval_id}}")
async def decide(
    request: Request,
    org: str,
    approval_id: str,
    services: ServicesDep,
    session: ActionSession,
    decision: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    target, source = f"{org}/{approval_id}", source_of(request)
    if decision not in ("approve", "deny"):
        error = SiestaError("the form must say approve or deny", code="invalid_request")
        return await to_thread.run_sync(lambda: _page(services, session, status=422, error=error))
    approve = decision == "approve"
    name = session.token_name
    try:
        outcome = await to_thread.run_sync(
            lambda: services.tools.decide(org, approval_id, approve, name, name)
        )
    except SiestaError as error:
        record_action(
            services,
            name,
            f"approval.{decision}",
            target,
            source=source,
            details={"ok": False, "error": error.code},
        )
        failed = error
        return await to_thread.run_sync(
            lambda: _page(services, session, status=status_for(failed), error=failed)
        )
    record_action(
        services,
        name,
        f"approval.{decision}",
        target,
        source=source,
        details={"ok": bool(outcome.get("ok")), "status": outcome.get("status")},
    )
    query = urlencode({"done": "approved" if approve else "denied", "target": target})
    return RedirectResponse(f"{PREFIX}/approvals?{query}", 303)
