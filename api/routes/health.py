"""Liveness, readiness and metrics: no auth, for probes and scrapers (``/metrics``
takes ``SIESTA_METRICS__TOKEN`` when one is set)."""

from __future__ import annotations

import hmac
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from siesta_contract.errors import ErrorBody
from siesta_contract.health import Health, Readiness

from api.deps import ServicesDep
from api.responses import error_responses
from runtime.core import metrics
from runtime.core.errors import SiestaError, Unauthorized

router = APIRouter(tags=["health"])
DRAINING = (
    "this instance is stopping (SIGTERM): it finishes the requests it serves; "
    "send new ones to another instance"
)


@router.get("/healthz")
async def healthz() -> Health:
    """The process is up. No dependencies.

    ``async`` on purpose: it must answer even when every worker thread is busy
    running long commands.
    """
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        503: {"model": Readiness, "description": "A dependency does not answer, or draining"}
    },
)
def readyz(request: Request, services: ServicesDep) -> JSONResponse:
    """The store and the provider answer, and the instance is not draining (after
    SIGTERM it answers 503 with only the ``draining`` check, while it finishes what it
    serves)."""
    checks: dict[str, Literal["ok"] | ErrorBody] = {}
    if request.app.state.drain.draining:
        checks["draining"] = ErrorBody(code="draining", message=DRAINING)
        readiness = Readiness(ready=False, checks=checks)
        return JSONResponse(readiness.model_dump(mode="json"), status_code=503)
    for name, ping in services.readiness_checks().items():
        try:
            ping()
            checks[name] = "ok"
        except SiestaError as error:
            checks[name] = ErrorBody(code=error.code, message=error.message)
        # Kept for alerts: a pod that is not ready leaves the Service, not the scrape.
        metrics.READINESS.labels(name).set(1 if checks[name] == "ok" else 0)
    readiness = Readiness(ready=all(value == "ok" for value in checks.values()), checks=checks)
    return JSONResponse(
        readiness.model_dump(mode="json"), status_code=200 if readiness.ready else 503
    )


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **error_responses(401),
    },
)
def prometheus_metrics(request: Request, services: ServicesDep) -> Response:
    """Prometheus text exposition. With ``SIESTA_METRICS__TOKEN`` set, it needs
    ``Authorization: Bearer <that token>`` (401 without it)."""
    required = services.settings.metrics.token
    given = request.headers.get("authorization")
    if required is not None and not _bearer_is(given, required.get_secret_value()):
        msg = "/metrics needs the metrics token (SIESTA_METRICS__TOKEN) as a bearer token"
        raise Unauthorized(msg)
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)


def _bearer_is(authorization: str | None, token: str) -> bool:
    scheme, _, given = (authorization or "").partition(" ")
    # Bytes as they came (latin-1): any value compares, none raises.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("latin-1", errors="replace"), token.encode()
    )
