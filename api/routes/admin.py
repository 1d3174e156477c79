"""The operators' routes: the ``admin`` scope.

Reconciliation normally runs in the background or as a CronJob
(``siesta-runtime reconcile``); this runs one pass on demand, e.g. after an
incident, and shows what it did.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from siesta_contract.admin import ReconcileReportPublic

from api.deps import ServicesDep, requires
from api.responses import COMMON, error_responses

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    dependencies=requires("admin"),
    responses=error_responses(*COMMON),
)


@router.post("/reconcile")
def reconcile(
    services: ServicesDep,
    dry_run: Annotated[bool, Query(alias="dryRun")] = False,
) -> ReconcileReportPublic:
    """One reconciliation pass (what ``siesta-runtime reconcile`` prints)."""
    report = services.reconciler.run(dry_run=dry_run)
    return ReconcileReportPublic.model_validate(
        {"deployment": services.deployment_id, **report.as_dict()}
    )
