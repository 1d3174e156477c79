"""The FastAPI application: routes, auth and error mapping over ``runtime``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from anyio import to_thread
from fastapi import FastAPI
from starlette.routing import Mount, Route

from api import errors, openapi
from api.background import every
from api.console import console_router
from api.context import RequestContext
from api.drain import Drain, DrainMiddleware
from api.e2b.app import SignedFiles, create_e2b_app
from api.e2b.hosts import PortHosts
from api.fleet_history import FleetHistory, sample_forever
from api.idempotency import Idempotency
from api.limits import FORM_FRAMING_BYTES, BodySizeLimit
from api.mcp import McpEndpoint
from api.path_form import InertPathForm
from api.previews import PreviewHosts
from api.request_metrics import RequestMetrics
from api.routes import (
    admin,
    admin_images,
    agents,
    approvals,
    conversations,
    files,
    filesystem,
    health,
    images,
    js,
    knowledge,
    memory,
    network,
    ports,
    processes,
    sandbox,
    secrets,
    snapshots,
    terminal,
    tiers,
    tools,
)
from api.routes import metrics as sandbox_metrics
from api.tracing import TraceContext
from runtime.core import metrics
from runtime.core.version import version
from runtime.services import Services
from runtime.sessions.fleet_gauges import FleetGauges
from runtime.sessions.pool import PoolRefiller
from runtime.sessions.reconcile import reconcile_forever
from runtime.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings, build: Callable[[Settings], Services]) -> FastAPI:
    """The app over the runtime ``build`` makes when it starts (its entry point hands
    in ``runtime.wiring.build_services``: the app itself never opens a backend)."""
    mcp = McpEndpoint()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Sandbox handlers are sync and hold a thread for a command's whole run.
        to_thread.current_default_thread_limiter().total_tokens = settings.http.worker_threads
        services = build(settings)
        app.state.services = services
        warming = openapi.warm(app)
        gauges = FleetGauges(services.fleet)
        metrics.REGISTRY.register(gauges)
        app.state.fleet_history = history = FleetHistory(settings.metrics.history_samples)
        loops = [sample_forever(gauges, history, settings.metrics.fleet_refresh_seconds)]
        if settings.background_reconcile:
            loops.append(
                reconcile_forever(
                    lambda: to_thread.run_sync(services.reconciler.run),
                    settings.reconcile.interval_seconds,
                )
            )
        if settings.e2b.enabled:  # sandboxes past their timeout killed or paused
            interval = settings.e2b.sweep_interval_seconds
            loops.append(every(interval, services.e2b_tick, "the E2B sweep"))
        interval = settings.processes.upkeep_interval_seconds
        loops.append(every(interval, services.processes_tick, "process upkeep"))
        services.prepare_ahead()
        refiller = (
            PoolRefiller(
                services.pool, settings.provision.concurrency, settings.pool.refill_interval_seconds
            )
            if services.pool.enabled
            else None
        )
        if refiller is not None:
            refiller.start()
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            async with mcp.serving(services):
                yield
        finally:
            if refiller is not None:
                await to_thread.run_sync(refiller.stop)
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            metrics.REGISTRY.unregister(gauges)
            await to_thread.run_sync(openapi.finish_warming, warming)
            services.close()

    app = FastAPI(title="Siesta Runtime", version=version(), lifespan=lifespan)
    app.add_middleware(Idempotency)  # inside the body limit: reads only bodies it allows
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.http.max_request_bytes,
        # Uploads: the file limit plus room for the multipart framing.
        upload_max_bytes=settings.files.max_upload_bytes + FORM_FRAMING_BYTES,
        e2b_upload_max_bytes=settings.e2b.max_upload_bytes + FORM_FRAMING_BYTES,
    )
    app.add_middleware(InertPathForm)  # inside the host forms: their answers are their own
    app.add_middleware(
        PortHosts, domain=settings.e2b.ports_domain if settings.e2b.enabled else None
    )
    app.add_middleware(PreviewHosts, domain=settings.ports.preview_domain)
    app.add_middleware(RequestContext)
    app.add_middleware(TraceContext)
    app.state.drain = drain = Drain(settings.drain_seconds)
    app.add_middleware(DrainMiddleware, drain=drain)
    app.add_middleware(RequestMetrics)  # outermost: its time includes every other's
    errors.install(app)
    openapi.install(app)
    for module in (
        health,
        images,
        sandbox,
        processes,
        filesystem,
        terminal,
        sandbox_metrics,
        tiers,
        network,
        files,
        js,
        conversations,
        tools,
        approvals,
        agents,
        memory,
        knowledge,
        secrets,
        admin,
        admin_images,
        ports,
    ):
        app.include_router(module.router)
    app.include_router(snapshots.conversations)
    app.include_router(snapshots.router)
    app.include_router(ports.access)
    if settings.console.enabled:
        app.include_router(console_router())
    app.router.routes.append(Route("/mcp", mcp, include_in_schema=False))
    if settings.e2b.enabled:
        e2b = create_e2b_app(app.state)
        app.router.routes.append(Mount("/e2b", e2b))
        # Where the SDKs send a signed file URL when E2B_SANDBOX_URL is a path
        # (api/e2b/signed.py): envd's /files, the signature naming the sandbox.
        signed = Route("/files", SignedFiles(e2b), methods=["GET", "POST"])
        app.router.routes.append(signed)
    return app
