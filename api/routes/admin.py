"""The operators' routes: the ``admin`` scope.

Reconciliation normally runs in the background or as a CronJob
(``siesta-runtime reconcile``); this runs one pass on demand, e.g. after an
incident, and shows what it did. The audit trail lists what operators did, through
these routes and the console (``SIESTA_AUDIT__RETENTION_DAYS``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from siesta_contract.admin import AuditEntryPublic, AuditPage, ReconcileReportPublic

from api import audit
from api.deps import CallerDep, ServicesDep, every_org, requires
from api.responses import COMMON, error_responses
from runtime.core.operator_records import AuditFilter

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    dependencies=[*requires("admin"), *every_org("the operators' routes")],
    responses=error_responses(*COMMON),
)


@router.post("/reconcile")
def reconcile(
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    dry_run: Annotated[bool, Query(alias="dryRun")] = False,
) -> ReconcileReportPublic:
    """One reconciliation pass (what ``siesta-runtime reconcile`` prints)."""
    report = services.reconciler.run(dry_run=dry_run)
    if not dry_run:
        counts = {action: len(ids) for action, ids in report.actions.items()}
        audit.record(services, caller, request, "reconcile.run", services.deployment_id, **counts)
    return ReconcileReportPublic.model_validate(
        {"deployment": services.deployment_id, **report.as_dict()}
    )


@router.get("/audit")
def list_audit(
    services: ServicesDep,
    actor: Annotated[str | None, Query(max_length=200)] = None,
    action: Annotated[
        str | None,
        Query(max_length=100, description="An action, or a prefix ending in `.` (`image.`)"),
    ] = None,
    target: Annotated[str | None, Query(max_length=300)] = None,
    before: Annotated[float | None, Query(ge=0, description="The previous page's `next`")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditPage:
    """What operators did, newest first (``SIESTA_AUDIT__RETENTION_DAYS`` are kept)."""
    entries = services.audit.list(AuditFilter(actor, action, target, before, limit + 1))
    page = entries[:limit]
    return AuditPage(
        entries=[
            AuditEntryPublic(
                id=e.entry_id,
                at=e.at,
                actor=e.actor,
                action=e.action,
                target=e.target,
                source=e.source,
                via=e.via,
                details=e.details,
            )
            for e in page
        ],
        next=page[-1].at if len(entries) > limit else None,
    )
