"""The OpenAPI document as code on the event loop reads it (the idempotency middleware,
on every keyed request): its first build never holds the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from api import openapi
from api.openapi import document, install, warm
from tests.inprocess import in_process_service


def test_a_request_during_the_warm_up_build_waits_for_it_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = FastAPI()

    @app.post("/v1/things")
    def make_thing() -> dict[str, str]:
        return {}

    install(app)
    released = threading.Event()
    build = openapi._build

    def slow_build(app: FastAPI) -> dict[str, Any]:
        # Released from the loop: a loop held by the waiting request never releases it.
        assert released.wait(10), "the event loop was held while the document was built"
        return build(app)

    monkeypatch.setattr(openapi, "_build", slow_build)

    async def scenario() -> dict[str, Any]:
        warm(app)  # the build starts in its thread, holding the lock
        waiting = asyncio.ensure_future(document(app))
        await asyncio.sleep(0)  # the request starts waiting for the document
        released.set()  # which the loop can do only if that wait does not hold it
        return await waiting

    assert "/v1/things" in asyncio.run(scenario())["paths"]
    assert asyncio.run(document(app)) is app.openapi_schema  # built once, kept


def test_the_warm_up_build_never_outlives_the_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A build still running after shutdown would go on beside the process's next app:
    FastAPI silences its own pydantic warnings with ``warnings.catch_warnings``, whose
    filters are the process's, so two such blocks on two threads undo each other (a
    silenced warning then escapes; the suite turns it into an error)."""
    build = openapi._build
    started = threading.Event()

    def slow_build(app: FastAPI) -> dict[str, Any]:
        started.set()
        time.sleep(1.0)
        return build(app)

    monkeypatch.setattr(openapi, "_build", slow_build)
    with in_process_service(tmp_path, {"SIESTA_PROVIDER__TYPE": "fake"}):
        assert started.wait(10)
    assert not [t for t in threading.enumerate() if t.name == "openapi-warm"]
