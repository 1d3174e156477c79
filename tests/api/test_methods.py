"""A method a path does not take: 405 ``method_not_allowed`` whose ``Allow`` header and
body's ``allow`` list what the path's routes take — on every path of the app, and on
``/mcp``."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from starlette.routing import compile_path

from tests.helpers import headers
from tests.inprocess import InProcessService, app_routes, in_process_service

CONVERSATION = "/v1/conversations/c1"
TABLE: list[tuple[str, str, list[str]]] = [
    ("TRACE", "/healthz", ["GET"]),
    ("PUT", "/healthz", ["GET"]),
    ("HEAD", "/healthz", ["GET"]),
    ("DELETE", "/v1/images", ["GET"]),
    ("GET", "/v1/images/validate", ["POST"]),
    ("PATCH", f"{CONVERSATION}/sandbox/runCommand", ["POST"]),
    ("GET", f"{CONVERSATION}/sandbox/readFile", ["POST"]),
    ("DELETE", f"{CONVERSATION}/sandbox", ["GET"]),
    ("POST", CONVERSATION, ["DELETE"]),
    ("PUT", f"{CONVERSATION}/files", ["GET", "POST"]),
    ("DELETE", f"{CONVERSATION}/files/f1/content", ["GET"]),
    ("GET", f"{CONVERSATION}/js", ["POST"]),
    ("GET", "/v1/tools/execute", ["POST"]),
    ("POST", "/v1/tools/executions", ["GET"]),
    ("DELETE", "/v1/tools/approvals/a1", ["GET", "POST"]),
    ("POST", "/v1/tools/approvals", ["GET"]),
    ("GET", "/v1/admin/reconcile", ["POST"]),
    ("POST", "/v1/admin/audit", ["GET"]),
    ("DELETE", "/v1/admin/images", ["GET", "POST"]),
    ("DELETE", "/v1/admin/images/python:1", ["GET"]),
    ("GET", "/v1/admin/images/python:1/state", ["POST"]),
    ("GET", "/v1/admin/images/python/default", ["POST"]),
    ("PUT", "/v1/admin/images/python:1/builds", ["POST"]),
    ("POST", "/v1/admin/image-builds/" + "0" * 32, ["GET"]),
    ("POST", "/v1/admin/image-builds/" + "0" * 32 + "/events", ["GET"]),
    ("PUT", "/v1/agents", ["GET", "POST"]),
    ("POST", "/v1/agents/g1", ["DELETE", "GET"]),
    ("PUT", "/v1/memory-banks", ["GET", "POST"]),
    ("POST", "/v1/memory-banks/m1", ["DELETE", "GET"]),
    ("GET", "/v1/memory-banks/m1/entries", ["POST"]),
    ("POST", "/metrics", ["GET"]),
    ("POST", "/docs", ["GET", "HEAD"]),
    ("PUT", "/mcp", ["GET", "POST"]),
    ("DELETE", "/mcp", ["GET", "POST"]),
    ("PATCH", "/mcp", ["GET", "POST"]),
]
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")
_PARAMETER = re.compile(r"\{[^}]+\}")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {"SIESTA_PROVIDER__TYPE": "fake"}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def allow_of(service: InProcessService, method: str, url: str) -> list[str]:
    """The methods a 405 names, checked to be the same in the header and the body."""
    response = service.client.request(
        method, url, headers={**headers(), "X-Siesta-Conversation": "c1"}
    )
    assert response.status_code == 405, response.text
    header = [m for m in response.headers["allow"].split(", ") if m]
    if method != "HEAD":  # no body
        error = response.json()["error"]
        assert error["code"] == "method_not_allowed"
        assert error["allow"] == header
        assert method in error["message"]
    return header


@pytest.mark.parametrize(("method", "url", "allowed"), TABLE, ids=lambda v: str(v))
def test_405_names_the_methods_of_the_path(
    service: InProcessService, method: str, url: str, allowed: list[str]
) -> None:
    assert allow_of(service, method, url) == allowed


def test_every_wrong_method_on_every_path_of_the_app_names_the_paths_methods(
    service: InProcessService,
) -> None:
    routes = app_routes(service.client.app)  # type: ignore[arg-type]
    templates = {path for _, path in routes}
    checked = 0
    for template in sorted(templates):
        url = _PARAMETER.sub("x1", template)
        # Every route whose path matches, not only this template's (a literal
        # segment may also match another route's parameter).
        taken = {
            method for method, path in routes if compile_path(path)[0].fullmatch(url) is not None
        }
        for method in METHODS:
            if method in taken or (method == "HEAD" and "GET" in taken):
                continue  # HEAD is GET's on some routes and refused on others
            allowed = allow_of(service, method, url)
            assert set(allowed) - {"HEAD"} == taken, (method, url)
            assert allowed == sorted(allowed)
            checked += 1
    assert checked > 100
