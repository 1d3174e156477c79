"""The FastAPI application: routes, auth and error mapping over ``runtime``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from anyio import to_thread
from fastapi import FastAPI

from api import errors
from api.limits import BodySizeLimit
from api.routes import conversations, files, health, images, sandbox
from runtime.config import Settings
from runtime.services import Services


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Sandbox handlers are sync and hold a thread for a command's whole run.
        to_thread.current_default_thread_limiter().total_tokens = settings.http.worker_threads
        services = Services.build(settings)
        app.state.services = services
        try:
            yield
        finally:
            services.close()

    app = FastAPI(
        title="Siesta Runtime",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.http.max_request_bytes,
        # Uploads: the file limit plus room for the multipart framing.
        upload_max_bytes=settings.files.max_upload_bytes + 1024 * 1024,
    )
    errors.install(app)
    for module in (health, images, sandbox, files, conversations):
        app.include_router(module.router)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory``: settings from the ``SIESTA_*`` environment."""
    return create_app(Settings())
