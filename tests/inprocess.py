"""The service's app in this process, for API tests that need no real process.

Same settings (``SIESTA_*`` names), same app, same lifespan as ``siesta-runtime
serve``; requests go through Starlette's test client instead of a socket. Tests
that measure the service process, race threads against a real server or read a
stream as it is produced keep the real process (``tests/helpers.spawn_service``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from api.app import create_app
from runtime.settings import Settings
from runtime.wiring import build_services
from tests.helpers import PUBLISH_WITHOUT_APPROVAL, TOKEN


@dataclass
class InProcessService:
    client: TestClient
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def in_process_service(data_dir: Path, env: dict[str, str]) -> Iterator[InProcessService]:
    environ = {
        "SIESTA_API_TOKEN": TOKEN,
        "SIESTA_DATA_DIR": str(data_dir),
        "SIESTA_POOL__ENABLED": "false",
        **PUBLISH_WITHOUT_APPROVAL,
        **env,
    }
    with _environ(environ):
        settings = Settings()
    with TestClient(create_app(settings, build_services)) as client:
        yield InProcessService(client, data_dir, env)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """Settings read the environment once, when made: set it for that moment only."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def app_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the app serves, included routers flattened (HEAD left out:
    it is GET's)."""
    return {
        (method, str(context.path))
        for context in iter_route_contexts(app.routes)
        for method in context.methods or ()
        if method != "HEAD"
    }
