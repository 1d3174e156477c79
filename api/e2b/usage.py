"""E2B's pause and metrics: ``POST /sandboxes/{id}/pause``, ``GET /sandboxes/{id}/metrics``
and ``GET /sandboxes/metrics?sandbox_ids=``.

A pause is the idle tiers' ``paused`` (E2B's default, ``mode="full"``: memory and
processes kept) or ``stopped`` (``mode="filesystem"``, ``memory: false``: only the
disk); ``connect`` resumes either. Metrics are one sample, taken now from outside the
sandbox (no history is kept): E2B's list has that one entry when the asked window
includes now, and none for a sandbox with nothing running (stopped) to measure. Its
disk is the workspace's and the container's own file systems together (the user's
home is on the second).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api.e2b.control import MAX_PAGE, caller_of, handler, services_of
from api.e2b.errors import refuse
from runtime.core.errors import SessionBusy
from runtime.e2b.sandboxes import E2bSandboxes
from runtime.sandbox.metrics import SandboxMetrics

WINDOW_SLACK_SECONDS = 60
"""A window that ended less than this long ago still gets the sample taken now (the
SDK sends whole seconds, and clocks differ)."""


@handler
async def pause(request: Request) -> Response:
    _, org = caller_of(request)
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise refuse(400, f"the body is not JSON: {exc}") from exc
    memory = body.get("memory", True) if isinstance(body, dict) else None
    if not isinstance(memory, bool):
        raise refuse(400, "memory must be true or false")
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]
    try:
        paused = await to_thread.run_sync(
            lambda: services.e2b.pause(org, sandbox_id, keep_memory=memory)
        )
    except SessionBusy as exc:
        # Not 409: the SDKs read that as "paused already". 503: it runs on; try again.
        raise refuse(503, f"the sandbox is busy with a call and was not paused: {exc}") from exc
    if not paused:
        raise refuse(409, f"sandbox {sandbox_id} is paused already")
    return Response(status_code=204)


@handler
async def metrics(request: Request) -> Response:
    _, org = caller_of(request)
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]
    start, end = _second(request, "start"), _second(request, "end")
    sandbox = await to_thread.run_sync(lambda: services.e2b.get(org, sandbox_id))
    measured = await to_thread.run_sync(
        lambda: services.meter.measure(E2bSandboxes.context(sandbox))
    )
    sample = e2b_sample(measured)
    at = measured.sampled_at
    if (
        sample is None
        or (start is not None and start > at)
        or (end is not None and end < at - WINDOW_SLACK_SECONDS)
    ):
        return JSONResponse([])
    return JSONResponse([sample])


@handler
async def many_metrics(request: Request) -> Response:
    """``{"sandboxes": {id: sample}}`` for those of the ids the token's org has running
    or paused (unknown ids, and sandboxes being made or removed meanwhile, are left
    out). All are measured over one CPU window, not one each."""
    _, org = caller_of(request)
    services = services_of(request)
    ids = [i for i in request.query_params.get("sandbox_ids", "").split(",") if i]
    if not ids or len(ids) > MAX_PAGE:
        raise refuse(400, f"sandbox_ids must name 1 to {MAX_PAGE} sandboxes")

    def measure_all() -> dict[str, Any]:
        found = {s.sandbox_id: s for s in services.e2b.list(org)}
        contexts = {i: E2bSandboxes.context(found[i]) for i in dict.fromkeys(ids) if i in found}
        measured = services.meter.measure_many(contexts)
        samples = {sandbox_id: e2b_sample(m) for sandbox_id, m in measured.items()}
        return {sandbox_id: s for sandbox_id, s in samples.items() if s is not None}

    return JSONResponse({"sandboxes": await to_thread.run_sync(measure_all)})


def e2b_sample(measured: SandboxMetrics) -> dict[str, Any] | None:
    """One entry of E2B's metrics; ``None`` when nothing runs to measure."""
    if not measured.measurable:
        return None
    usage = measured.usage
    # E2B has one disk; here the user's home is on the container's own (the writable
    # layer's) and /mnt/work on the workspace's: the sandbox's disk is both.
    disks = [d for d in (usage.workspace, usage.root) if d is not None]
    at = measured.sampled_at
    return {
        "timestamp": datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"),
        "timestampUnix": int(at),
        "cpuCount": max(1, math.ceil(usage.cpu_limit)),
        "cpuUsedPct": measured.cpu_used_pct or 0.0,
        "memUsed": usage.memory_used_bytes or 0,
        "memTotal": usage.memory_limit_bytes or 0,
        "memCache": usage.memory_cache_bytes or 0,
        "diskUsed": sum(d.used_bytes for d in disks),
        "diskTotal": sum(d.total_bytes for d in disks),
    }


def _second(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise refuse(400, f"{name} must be a Unix time in seconds") from exc


ROUTES = [
    # Before control's ``/sandboxes/{sandbox_id}``, which would take "metrics" for an id.
    Route("/sandboxes/metrics", many_metrics, methods=["GET"]),
    Route("/sandboxes/{sandbox_id}/pause", pause, methods=["POST"]),
    Route("/sandboxes/{sandbox_id}/metrics", metrics, methods=["GET"]),
]
