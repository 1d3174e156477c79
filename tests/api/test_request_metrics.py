"""Requests counted by route template and status class, timed to their response's
start (``api/request_metrics.py``), on a small app of its own and on the service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.websockets import WebSocket

from api.fleet_history import quantile
from api.request_metrics import REQUEST_SECONDS, RequestMetrics
from runtime.core import metrics
from tests.helpers import TOKEN
from tests.inprocess import in_process_service

STREAM_PAUSE = 0.5


def count(method: str, route: str, status: str) -> float:
    sample = metrics.REGISTRY.get_sample_value(
        "siesta_http_requests_total", {"method": method, "route": route, "status": status}
    )
    return sample or 0.0


def slowest_seconds(route: str) -> float:
    """The largest bucket bound that any of the route's GET requests took longer than."""
    over = 0.0
    for family in REQUEST_SECONDS.collect():
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.labels["route"] == route:
                total = metrics.REGISTRY.get_sample_value(
                    "siesta_http_request_duration_seconds_count", {"method": "GET", "route": route}
                )
                if sample.value < (total or 0):
                    over = max(over, float(sample.labels["le"]))
    return over


async def item(request: Request) -> Response:
    return PlainTextResponse(request.path_params["item_id"])


async def broken(request: Request) -> Response:
    msg = "on purpose"
    raise RuntimeError(msg)


async def stream(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"first"
        await asyncio.sleep(STREAM_PAUSE)
        yield b"second"

    return StreamingResponse(chunks())


async def socket(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("hi")
    await websocket.close()


@pytest.fixture
def client() -> TestClient:
    inner = Starlette(routes=[Route("/things/{item_id}", item)])
    app = Starlette(
        routes=[
            Route("/rm-test/items/{item_id}", item),
            Route("/rm-test/broken", broken),
            Route("/rm-test/stream", stream),
            WebSocketRoute("/rm-test/socket", socket),
            Mount("/rm-test/mounted", inner),
        ]
    )
    return TestClient(RequestMetrics(app), raise_server_exceptions=False)


def test_a_route_is_counted_by_its_template_never_its_path(client: TestClient) -> None:
    before = count("GET", "/rm-test/items/{item_id}", "2xx")
    for name in ("a-1", "b-2", "c-3"):
        assert client.get(f"/rm-test/items/{name}").status_code == 200
    assert count("GET", "/rm-test/items/{item_id}", "2xx") == before + 3
    assert b"a-1" not in generate_latest(metrics.REGISTRY)


def test_a_mounted_route_keeps_the_mounts_prefix(client: TestClient) -> None:
    before = count("GET", "/rm-test/mounted/things/{item_id}", "2xx")
    client.get("/rm-test/mounted/things/x")
    assert count("GET", "/rm-test/mounted/things/{item_id}", "2xx") == before + 1


def test_unmatched_paths_and_unknown_methods_share_fixed_labels(client: TestClient) -> None:
    before = count("OTHER", "unmatched", "4xx")
    client.request("BREW", "/rm-test/no/such/path-1")
    client.request("BREW", "/rm-test/no/such/path-2")
    assert count("OTHER", "unmatched", "4xx") == before + 2


def test_a_handler_that_raises_counts_as_a_server_error(client: TestClient) -> None:
    before = count("GET", "/rm-test/broken", "5xx")
    assert client.get("/rm-test/broken").status_code == 500
    assert count("GET", "/rm-test/broken", "5xx") == before + 1


def test_a_stream_is_timed_to_its_start_not_its_end(client: TestClient) -> None:
    assert client.get("/rm-test/stream").text == "firstsecond"
    assert count("GET", "/rm-test/stream", "2xx") >= 1
    assert slowest_seconds("/rm-test/stream") < STREAM_PAUSE


def test_a_websocket_is_counted_once_when_accepted_and_never_timed(client: TestClient) -> None:
    before = count("WEBSOCKET", "/rm-test/socket", "1xx")
    with client.websocket_connect("/rm-test/socket") as websocket:
        assert websocket.receive_text() == "hi"
    assert count("WEBSOCKET", "/rm-test/socket", "1xx") == before + 1
    assert not any(
        sample.labels.get("method") == "WEBSOCKET"
        for family in REQUEST_SECONDS.collect()
        for sample in family.samples
    )


def test_the_service_labels_its_own_routes_by_template(tmp_path: Path) -> None:
    env = {"SIESTA_PROVIDER__TYPE": "fake"}
    route = "/v1/conversations/{conversation_id}/sandbox/runCommand"
    before = count("POST", route, "2xx")
    with in_process_service(tmp_path, env) as service:
        answer = service.client.post(
            "/v1/conversations/conv-rm-1/sandbox/runCommand",
            json={"command": "echo hi"},
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "X-Siesta-Org": "org-a",
                "X-Siesta-User": "user-1",
                "X-Siesta-Base-Image": "debian-base",
            },
        )
        assert answer.status_code == 200, answer.text
        service.client.post("/mcp", json={})
        text = service.client.get("/metrics").text
    assert count("POST", route, "2xx") == before + 1
    assert count("POST", "/mcp", "4xx") >= 1
    assert "conv-rm-1" not in text
    assert 'siesta_build_info{python="' in text
    assert "process_resident_memory_bytes" in text


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        ({}, None),
        ({0.1: 0, 1.0: 0, float("inf"): 0}, None),
        ({0.1: 100, 1.0: 100, float("inf"): 100}, 0.095),
        ({0.1: 0, 1.0: 100, float("inf"): 100}, 0.1 + 0.9 * 0.95),
        ({0.1: 50, 1.0: 50, float("inf"): 100}, 1.0),
    ],
)
def test_the_charts_p95_reads_buckets_as_prometheus_does(
    buckets: dict[float, float], expected: float | None
) -> None:
    found = quantile(0.95, buckets)
    assert found == expected if expected is None else found == pytest.approx(expected)
