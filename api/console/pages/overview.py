"""The fleet at a glance: sandboxes by state and over time, capacity against the
limits, the warm pool, recent failures, egress refusals, and which deployment and
version this is."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from siesta_contract.tools import ExecutionStatus

from api.console.auth import PageSession
from api.console.chart import fleet_charts
from api.console.render import package_version, render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from runtime.core import metrics
from runtime.core.network_rules import EgressRefusals
from runtime.core.records import ExecutionFilter, SessionRecord, SessionStatus
from runtime.services import Services

RECENT = 10

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(PREFIX)
def overview(request: Request, services: ServicesDep, session: PageSession) -> HTMLResponse:
    records = services.fleet.records()
    samples = request.app.state.fleet_history.samples()
    by_state = Counter(record.status.value for record in records)
    return render(
        session,
        "overview.html",
        page="overview",
        states=[(status.value, by_state.get(status.value, 0)) for status in SessionStatus],
        total=len(records),
        charts=fleet_charts(samples),
        sampled=len(samples),
        refresh_seconds=services.settings.metrics.fleet_refresh_seconds,
        capacity=services.fleet.capacity_use(records),
        pool=pool_view(services),
        errors=services.tools.find(
            None, ExecutionFilter(status=ExecutionStatus.FAILED, limit=RECENT)
        ),
        refusals=egress_refusals(services, records),
        egress_enabled=services.settings.egress.enabled,
        deployment=services.deployment_id,
        version=package_version(),
    )


def pool_view(services: Services) -> dict[str, Any]:
    """Ready members per image (from the store: every instance's) and this instance's
    claims: hits, and misses by image and reason (its Prometheus counters)."""
    members = Counter(member.image_id for member in services.fleet.pool_members())
    return {
        "enabled": services.pool.enabled,
        "members": sorted(members.items()),
        "claims": _samples(metrics.POOL_CLAIMS, "outcome"),
        "misses": _samples(metrics.POOL_MISSES, "image", "reason"),
    }


def _samples(counter: Any, *labels: str) -> list[tuple[str, int]]:
    found = []
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                name = " / ".join(sample.labels[label] for label in labels)
                found.append((name, int(sample.value)))
    return sorted(found)


def egress_refusals(
    services: Services, records: list[SessionRecord]
) -> list[tuple[SessionRecord, EgressRefusals]]:
    """Conversations whose requests the egress proxies refused lately, latest first."""
    found = []
    for record in records:
        refusals = services.network.refusals(record.org, record.conversation)
        if refusals is not None:
            found.append((record, refusals))
    return sorted(found, key=lambda item: -item[1].last_at)[:RECENT]
