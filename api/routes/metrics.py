"""A conversation's sandbox measured live: CPU, memory, disk, processes.

Read from outside the sandbox (``runtime.sandbox.metrics``): no command runs in it,
no lease is taken (a long command does not delay the answer), and a paused sandbox
stays paused.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter

from siesta_contract.metrics import SandboxMetricsPublic

from api.deps import ContextDep, ServicesDep, requires
from api.responses import CONVERSATION, error_responses
from runtime.sandbox.metrics import SandboxMetrics

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox",
    tags=["sandbox"],
    dependencies=requires("sandbox"),
    responses=error_responses(*CONVERSATION, 404, 501),
)


@router.get("/metrics")
async def sandbox_metrics(ctx: ContextDep, services: ServicesDep) -> SandboxMetricsPublic:
    """The sandbox's CPU, memory and disk now (404 when the conversation has none; 501
    ``metrics_not_supported`` where the provider cannot read them)."""
    measured = await to_thread.run_sync(lambda: services.meter.measure(ctx))
    return public_metrics(measured)


def public_metrics(measured: SandboxMetrics) -> SandboxMetricsPublic:
    usage = measured.usage
    disk, root = usage.workspace, usage.root
    return SandboxMetricsPublic(
        state=usage.state.value,
        sampledAt=measured.sampled_at,
        cpuCount=usage.cpu_limit,
        cpuUsedPct=measured.cpu_used_pct,
        memUsedBytes=usage.memory_used_bytes,
        memCacheBytes=usage.memory_cache_bytes,
        memLimitBytes=usage.memory_limit_bytes,
        pids=usage.pids,
        diskUsedBytes=disk.used_bytes if disk else None,
        diskTotalBytes=disk.total_bytes if disk else None,
        diskFreeBytes=disk.free_bytes if disk else None,
        rootDiskUsedBytes=root.used_bytes if root else None,
        rootDiskTotalBytes=root.total_bytes if root else None,
        rootDiskFreeBytes=root.free_bytes if root else None,
        egressRefusals=measured.egress_refusals,
    )
