"""Audit: what operators did (``runtime/admin/audit.py``), newest first, filtered by
who, action (or its prefix) and target, a page of entries at a time."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from api.console.auth import PageSession
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from runtime.core.operator_records import AuditFilter

PAGE = 100

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
Filter = Annotated[str, Query(max_length=200)]


@router.get(f"{PREFIX}/audit")
def audit(
    services: ServicesDep,
    session: PageSession,
    actor: Filter = "",
    action: Filter = "",
    target: Filter = "",
    before: Annotated[float | None, Query(ge=0)] = None,
) -> HTMLResponse:
    filters = {"actor": actor.strip(), "action": action.strip(), "target": target.strip()}
    found = services.audit.list(
        AuditFilter(
            filters["actor"] or None,
            filters["action"] or None,
            filters["target"] or None,
            before,
            PAGE + 1,
        )
    )
    entries = found[:PAGE]
    older = {**{k: v for k, v in filters.items() if v}, "before": entries[-1].at} if entries else {}
    return render(
        session,
        "audit.html",
        page="audit",
        entries=entries,
        filters=filters,
        next=urlencode(older) if len(found) > PAGE else "",
        retention_days=f"{services.settings.audit.retention_days:g}",
    )
