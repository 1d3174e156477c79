"""Every route of every face is classified in ``api/inventory.py``, and every route
classified as an agent function reaches the policy check and the executions log.

A route added without a classification fails the first tests; one classified as an
agent function that skips the door fails the last ones (the function disabled by the
deployment must refuse it before anything runs, and a held one must leave its
approval in the log).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount, Route
from starlette.testclient import TestClient, WebSocketDenialResponse

from api.e2b.protocol.filesystem import filesystem_connect
from api.e2b.protocol.process import process_connect
from api.inventory import ANY_FUNCTION, E2B_ROUTES, E2B_RPC, GRANT, IDENTITY, OPERATOR, PUBLIC
from api.inventory import ROUTES as INVENTORY
from runtime.functions.js import JS_EXECUTOR
from runtime.functions.sandbox import SANDBOX
from runtime.tools.door import DOOR_FUNCTIONS
from tests.helpers import TOKEN
from tests.inprocess import InProcessService, in_process_service

CLASSES = {PUBLIC, IDENTITY, OPERATOR, GRANT, ANY_FUNCTION}
DIRECT_FUNCTIONS = {spec.name for spec in SANDBOX} | {JS_EXECUTOR.name}
FUNCTIONS = DIRECT_FUNCTIONS | set(DOOR_FUNCTIONS)
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "X-Siesta-Org": "org-inventory",
    "X-Siesta-User": "user-1",
    "X-Siesta-Base-Image": "debian-base",
}
CONV = "/v1/conversations/inventory"


def main_routes(app: Any) -> set[tuple[str, str]]:
    """(method, path) of every route of the app: ``WS`` for a WebSocket, ``MOUNT`` for
    a face served whole by an ASGI app of its own (MCP, E2B)."""
    faces = {
        route.path
        for route in app.routes
        if isinstance(route, Mount) or (isinstance(route, Route) and route.methods is None)
    }
    found = {
        (method, str(context.path))
        for context in iter_route_contexts(app.routes)
        for method in (context.methods or {"WS"})
        if method != "HEAD" and str(context.path) not in faces
    }
    return found | {("MOUNT", path) for path in faces}


def e2b_routes(app: Any) -> set[tuple[str, str]]:
    e2b: Any = next(r for r in app.routes if isinstance(r, Mount) and r.path == "/e2b").app
    found = set()
    for route in e2b.routes:
        if isinstance(route, Mount):  # envd: its plain HTTP routes (Connect: below)
            envd: Any = route.app
            inner = envd._http  # the dispatcher's own routes
            found |= {
                (method, route.path + r.path)
                for r in inner.routes
                for method in r.methods - {"HEAD"}
            }
        elif isinstance(route, Route):
            found |= {(method, route.path) for method in (route.methods or set()) - {"HEAD"}}
    return found


def connect_methods() -> set[str]:
    """``service/Method`` of every envd Connect method the SDKs may call."""
    found = set()
    for module, service in (
        (process_connect, "process.Process"),
        (filesystem_connect, "filesystem.Filesystem"),
    ):
        protocol = getattr(module, service.split(".")[1])
        for name, member in vars(protocol).items():
            if inspect.isfunction(member) and not name.startswith("_"):
                found.add(f"{service}/{''.join(part.title() for part in name.split('_'))}")
    return found


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    disabled = {name: "disabled" for name in FUNCTIONS}
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOOLS__FUNCTION_POLICIES": json.dumps(disabled),
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def test_every_route_of_the_app_is_classified(service: InProcessService) -> None:
    assert main_routes(service.client.app) == set(INVENTORY)


def test_every_e2b_route_and_connect_method_is_classified(service: InProcessService) -> None:
    assert e2b_routes(service.client.app) == set(E2B_ROUTES)
    assert connect_methods() == set(E2B_RPC)


def test_each_class_is_known_and_each_function_is_an_agent_function() -> None:
    for classified in (*INVENTORY.values(), *E2B_ROUTES.values(), *E2B_RPC.values()):
        assert classified in CLASSES or classified in FUNCTIONS, classified


BODIES: dict[str, dict[str, Any]] = {
    "runCommand": {"command": "echo hi"},
    "writeFile": {"path": "a.txt", "content": "x"},
    "readFile": {"path": "a.txt"},
    "listFiles": {"path": "."},
    "publishFiles": {"paths": ["a.txt"]},
    "JsExecutorAgent": {"code": "1+1"},
    "startProcess": {"command": "sleep 1"},
    "writeProcessInput": {"data": "x"},
    "stopProcess": {"signal": "SIGTERM"},
    "statPath": {"path": "a.txt"},
    "listDirectory": {"path": "."},
    "makeDirectory": {"path": "d"},
    "movePath": {"source": "a.txt", "destination": "b.txt"},
    "removePath": {"path": "a.txt"},
    "watchDirectory": {"path": "."},
    "setMetadata": {"path": "a.txt", "metadata": {"k": "v"}},
    "createSnapshot": {},
    # One body for both of its routes: /fork reads the first id, /forks the list.
    "forkSandbox": {"conversationId": "inventory-fork", "conversationIds": ["inventory-fork"]},
    "startFromSnapshot": {"conversationId": "inventory-start"},
    "setNetworkRules": {"internet": True},
    "openPort": {},
}
"""A valid body for each agent-function route of ``/v1``."""
HTTP_FUNCTION_ROUTES = sorted(
    (route, function)
    for route, function in INVENTORY.items()
    if function in FUNCTIONS and route[0] not in ("WS", "MOUNT")
)
PROCESS_FUNCTIONS = {"writeProcessInput", "stopProcess"}
"""They name a running process: the fake provider runs none, so the route answers 404
before the door. The Docker test of the door (tests/api/test_door_docker.py) calls
them on a real process."""


@pytest.mark.parametrize("route", HTTP_FUNCTION_ROUTES, ids=lambda r: f"{r[0][0]} {r[0][1]}")
def test_an_agent_function_route_is_refused_when_its_function_is_disabled(
    service: InProcessService, route: tuple[tuple[str, str], str]
) -> None:
    (method, path), function = route
    url = path.replace("/v1/conversations/{conversation_id}", CONV).replace("{pid}", "7")
    url = url.replace("{snapshot_id}", "snap-inventory").replace("{port}", "8000")
    body = BODIES[function] if method != "GET" else None
    response = service.client.request(method, url, headers=HEADERS, json=body)
    if function in PROCESS_FUNCTIONS:
        assert response.status_code == 404, response.text
        return
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "function_not_available"
    assert function in error["message"] or (DOOR_FUNCTIONS.get(function) or "") in error["message"]


def test_the_terminal_is_refused_before_the_upgrade_when_disabled(
    service: InProcessService,
) -> None:
    client = TestClient(service.client.app)
    with (
        pytest.raises(WebSocketDenialResponse) as refused,
        client.websocket_connect(f"{CONV}/sandbox/terminal", headers=HEADERS),
    ):
        pass
    assert refused.value.status_code == 403
    assert refused.value.json()["error"]["code"] == "function_not_available"
