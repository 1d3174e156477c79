"""Every route's scope, as a table: a token without it gets 403 naming it, one with it
gets past authorisation; no token or a wrong one is 401. The table must list every
route the app has, so a new route cannot be left out.

The console's routes (``/console``) take no bearer token at all, whatever its scopes:
its pages send the browser to the sign-in form (303), its changes are refused (401)
without a console session, and signing in reads the token from the form."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from httpx2 import Response
from starlette.testclient import TestClient, WebSocketDenialResponse

from runtime.core.settings import SCOPES
from tests.helpers import TOKEN, tokens_setting
from tests.inprocess import InProcessService, app_routes, in_process_service

PUBLIC, ANY_TOKEN = "public", "any token"
PORT_TOKEN = "a port token, never a bearer token"
SIGNED_URL = "an E2B file URL's signature, never a bearer token"
"""A sandbox's port (a browser's path): every bearer token is 401 there."""
CONSOLE_PAGE = "a console session's cookie, never a bearer token (else: to the sign-in form)"
CONSOLE_CHANGE = "a console session's cookie and CSRF token, never a bearer token (else: 401)"
CONSOLE_SIGN_IN = "an admin token in the form, never the bearer header (else: 401)"
CONSOLE = (CONSOLE_PAGE, CONSOLE_CHANGE, CONSOLE_SIGN_IN)
CONVERSATION = "/v1/conversations/{conversation_id}"
PORT_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
SCOPE_OF: dict[tuple[str, str], str] = {
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/docs/oauth2-redirect"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    ("GET", "/v1/images"): ANY_TOKEN,
    ("POST", "/v1/images/validate"): ANY_TOKEN,
    ("GET", f"{CONVERSATION}/sandbox"): "sandbox",
    ("DELETE", CONVERSATION): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/runCommand"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/writeFile"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/readFile"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/listFiles"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/publishFiles"): "sandbox",
    ("POST", f"{CONVERSATION}/files"): "sandbox",
    ("GET", f"{CONVERSATION}/files"): "sandbox",
    ("GET", f"{CONVERSATION}/files/{{file_id}}/content"): "sandbox",
    ("POST", f"{CONVERSATION}/js"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/processes"): "shell",
    ("GET", f"{CONVERSATION}/sandbox/processes"): "shell",
    ("GET", f"{CONVERSATION}/sandbox/processes/{{pid}}"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/processes/{{pid}}/input"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/processes/{{pid}}/signal"): "shell",
    ("GET", f"{CONVERSATION}/sandbox/metrics"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/pause"): "sandbox",
    ("POST", f"{CONVERSATION}/sandbox/resume"): "sandbox",
    ("GET", f"{CONVERSATION}/sandbox/network"): "sandbox",
    ("PUT", f"{CONVERSATION}/sandbox/network"): "sandbox",
    ("GET", f"{CONVERSATION}/sandbox/ports/{{port}}"): "sandbox",
    **{(m, f"{CONVERSATION}/ports/{{port}}/{{path:path}}"): PORT_TOKEN for m in PORT_METHODS},
    ("POST", f"{CONVERSATION}/sandbox/fs/stat"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/fs/list"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/fs/mkdir"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/fs/move"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/fs/remove"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/fs/metadata"): "shell",
    ("POST", f"{CONVERSATION}/sandbox/fs/watchers"): "shell",
    ("GET", f"{CONVERSATION}/sandbox/fs/watchers/{{watcher_id}}"): "shell",
    ("DELETE", f"{CONVERSATION}/sandbox/fs/watchers/{{watcher_id}}"): "shell",
    ("POST", f"{CONVERSATION}/snapshots"): "sandbox",
    ("POST", f"{CONVERSATION}/fork"): "sandbox",
    ("POST", f"{CONVERSATION}/forks"): "sandbox",
    ("GET", "/files"): SIGNED_URL,
    ("POST", "/files"): SIGNED_URL,
    ("GET", "/v1/snapshots"): "sandbox",
    ("GET", "/v1/snapshots/{snapshot_id}"): "sandbox",
    ("DELETE", "/v1/snapshots/{snapshot_id}"): "sandbox",
    ("POST", "/v1/snapshots/{snapshot_id}/conversations"): "sandbox",
    ("GET", "/v1/tools/system"): "tools",
    ("POST", "/v1/tools/catalog"): "tools",
    ("POST", "/v1/tools/execute"): "tools",
    ("GET", "/v1/tools/executions"): "tools",
    ("GET", "/v1/tools/approvals"): "approve",
    ("GET", "/v1/tools/approvals/{approval_id}"): "approve",
    ("POST", "/v1/tools/approvals/{approval_id}"): "approve",
    ("GET", "/v1/agents"): "tools",
    ("POST", "/v1/agents"): "tools",
    ("GET", "/v1/agents/{agent_id}"): "tools",
    ("DELETE", "/v1/agents/{agent_id}"): "tools",
    ("POST", "/v1/admin/reconcile"): "admin",
    ("GET", "/v1/admin/audit"): "admin",
    ("GET", "/v1/admin/images"): "admin",
    ("POST", "/v1/admin/images"): "admin",
    ("POST", "/v1/admin/image-imports"): "admin",
    ("GET", "/v1/admin/images/{ref}"): "admin",
    ("POST", "/v1/admin/images/{ref}/state"): "admin",
    ("POST", "/v1/admin/images/{ref}/default"): "admin",
    ("POST", "/v1/admin/images/{ref}/builds"): "admin",
    ("GET", "/v1/admin/image-builds/{build_id}"): "admin",
    ("GET", "/v1/admin/image-builds/{build_id}/events"): "admin",
    ("GET", "/v1/secrets"): "admin",
    ("PUT", "/v1/secrets/{name}"): "admin",
    ("GET", "/v1/secrets/{name}"): "admin",
    ("DELETE", "/v1/secrets/{name}"): "admin",
    ("POST", "/v1/memory-banks"): "admin",
    ("GET", "/v1/memory-banks"): "tools",
    ("GET", "/v1/memory-banks/{bank_id}"): "tools",
    ("DELETE", "/v1/memory-banks/{bank_id}"): "admin",
    ("POST", "/v1/memory-banks/{bank_id}/entries"): "admin",
    ("POST", "/v1/knowledge-bases"): "admin",
    ("GET", "/v1/knowledge-bases"): "tools",
    ("GET", "/v1/knowledge-bases/{base_id}"): "tools",
    ("DELETE", "/v1/knowledge-bases/{base_id}"): "admin",
    ("POST", "/v1/knowledge-bases/{base_id}/documents"): "admin",
    ("GET", "/v1/knowledge-bases/{base_id}/documents"): "tools",
    ("GET", "/v1/knowledge-bases/{base_id}/documents/{version_id}"): "tools",
    ("DELETE", "/v1/knowledge-bases/{base_id}/documents/{version_id}"): "admin",
    ("POST", "/v1/knowledge-bases/{base_id}/search"): "tools",
    ("GET", "/console/sign-in"): PUBLIC,
    ("GET", "/console/static/console.css"): PUBLIC,
    ("GET", "/console/static/build-log.js"): PUBLIC,
    ("POST", "/console/sign-in"): CONSOLE_SIGN_IN,
    ("POST", "/console/sign-out"): CONSOLE_CHANGE,
    ("GET", "/console"): CONSOLE_PAGE,
    ("GET", "/console/sandboxes"): CONSOLE_PAGE,
    ("GET", "/console/sandboxes/{org}/{conversation_id}"): CONSOLE_PAGE,
    ("GET", "/console/sandboxes/{org}/{conversation_id}/{action}"): CONSOLE_PAGE,
    ("POST", "/console/sandboxes/{org}/{conversation_id}/{action}"): CONSOLE_CHANGE,
    ("GET", "/console/approvals"): CONSOLE_PAGE,
    ("POST", "/console/approvals/{org}/{approval_id}"): CONSOLE_CHANGE,
    ("GET", "/console/executions"): CONSOLE_PAGE,
    ("GET", "/console/executions/{org}/{execution_id}"): CONSOLE_PAGE,
    ("GET", "/console/settings"): CONSOLE_PAGE,
    ("GET", "/console/images"): CONSOLE_PAGE,
    ("POST", "/console/images"): CONSOLE_CHANGE,
    ("GET", "/console/images/{ref}"): CONSOLE_PAGE,
    ("GET", "/console/images/{ref}/retire"): CONSOLE_PAGE,
    ("POST", "/console/images/{ref}/{action}"): CONSOLE_CHANGE,
    ("GET", "/console/knowledge"): CONSOLE_PAGE,
    ("POST", "/console/knowledge/{org}"): CONSOLE_CHANGE,
    ("GET", "/console/knowledge/{org}/{base_id}"): CONSOLE_PAGE,
    ("POST", "/console/knowledge/{org}/{base_id}/documents"): CONSOLE_CHANGE,
    ("POST", "/console/knowledge/{org}/{base_id}/documents/{version_id}/remove"): CONSOLE_CHANGE,
    ("POST", "/console/knowledge/{org}/{base_id}/delete"): CONSOLE_CHANGE,
    ("GET", "/console/image-builds/{build_id}"): CONSOLE_PAGE,
    ("GET", "/console/image-builds/{build_id}/events"): CONSOLE_PAGE,
    ("GET", "/console/audit"): CONSOLE_PAGE,
}
ROUTES = sorted(SCOPE_OF)
TOKEN_OF: dict[str, str] = {scope: f"{scope}-only-token-0123456789" for scope in SCOPES}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    tokens = tokens_setting(*((f"{s}-only", TOKEN_OF[s], [str(s)]) for s in SCOPES))
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_TOKENS": tokens}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def call(
    service: InProcessService, route: tuple[str, str], token: str | None
) -> tuple[int, dict[str, Any]]:
    response = request(service, route, token)
    body = response.json() if "json" in response.headers.get("content-type", "") else {}
    return response.status_code, body


def request(service: InProcessService, route: tuple[str, str], token: str | None) -> Response:
    method, path = route
    url = path.replace("{conversation_id}", "c").replace("{file_id}", "f")
    url = (
        url.replace("{snapshot_id}", "s")
        .replace("{approval_id}", "a")
        .replace("{pid}", "1")
        .replace("{watcher_id}", "w")
        .replace("{agent_id}", "g")
        .replace("{bank_id}", "m")
        .replace("{org}", "o")
        .replace("{execution_id}", "e")
        .replace("{action}", "suspend")
        .replace("{ref}", "absent:1")
        .replace("{build_id}", "0" * 32)
    )
    url = url.replace("{port}", "8000").replace("{path:path}", "x")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # No body and no context headers: authorisation is decided before either is read.
    return service.client.request(method, url, headers=headers, follow_redirects=False)


def assert_console_refuses(response: Response, route: tuple[str, str]) -> None:
    """What a console route answers a request without a console session."""
    required = SCOPE_OF[route]
    if required == CONSOLE_PAGE:
        assert response.status_code == 303, response.text
        assert response.headers["location"] == "/console/sign-in"
    else:
        assert response.status_code == 401, response.text
        assert response.headers["content-type"].startswith("text/html")
    if required == CONSOLE_CHANGE:
        assert response.headers["x-siesta-error"] == "console_sign_in_required"


def test_the_table_lists_every_route_of_the_app(service: InProcessService) -> None:
    assert app_routes(service.client.app) == set(SCOPE_OF)  # type: ignore[arg-type]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
@pytest.mark.parametrize("scope", SCOPES)
def test_a_token_gets_past_a_route_only_with_its_scope(
    service: InProcessService, route: tuple[str, str], scope: str
) -> None:
    required = SCOPE_OF[route]
    if required in CONSOLE:
        assert_console_refuses(request(service, route, TOKEN_OF[scope]), route)
        return
    status, body = call(service, route, TOKEN_OF[scope])
    if required == PORT_TOKEN:
        assert status == 401 and body["error"]["code"] == "unauthorized", body
    elif required == SIGNED_URL:  # E2B's shape: {"code", "message"}
        assert (status, body["code"]) == (401, 401), body
    elif required in (PUBLIC, ANY_TOKEN) or required == scope:
        assert status not in (401, 403), body
    else:
        assert status == 403, body
        assert body["error"]["code"] == "forbidden_scope"
        assert body["error"]["scope"] == required and body["error"]["token"] == f"{scope}-only"


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_the_api_token_has_every_scope(service: InProcessService, route: tuple[str, str]) -> None:
    if SCOPE_OF[route] in CONSOLE:  # a bearer token, even with every scope, is no session
        assert_console_refuses(request(service, route, TOKEN), route)
        return
    status, body = call(service, route, TOKEN)
    assert status not in (401, 403) or SCOPE_OF[route] in (PORT_TOKEN, SIGNED_URL), body


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
@pytest.mark.parametrize("token", [None, "wrong-token-0123456789", TOKEN_OF["admin"] + "x"])
def test_without_a_valid_token_only_public_routes_answer(
    service: InProcessService, route: tuple[str, str], token: str | None
) -> None:
    if SCOPE_OF[route] in CONSOLE:
        assert_console_refuses(request(service, route, token), route)
        return
    status, body = call(service, route, token)
    if SCOPE_OF[route] == PUBLIC:
        assert status == 200
    elif SCOPE_OF[route] == SIGNED_URL:
        assert (status, body["code"]) == (401, 401), body
    else:
        assert status == 401 and body["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("scope", SCOPES)
def test_the_terminal_websocket_needs_the_shell_scope(
    service: InProcessService, scope: str
) -> None:
    """The one WebSocket route (not in the table: it has no HTTP method) refuses the
    upgrade as the others refuse a request."""
    client = TestClient(service.client.app)
    url = "/v1/conversations/c/sandbox/terminal"
    for token in (None, TOKEN_OF[scope]):
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        with (
            pytest.raises(WebSocketDenialResponse) as refused,
            client.websocket_connect(url, headers=auth),
        ):
            pass
        code = refused.value.json()["error"]["code"]
        if token is None:
            assert (refused.value.status_code, code) == (401, "unauthorized")
        elif scope == "shell":  # past authorisation: no context headers were sent
            assert (refused.value.status_code, code) == (400, "missing_context")
        else:
            assert (refused.value.status_code, code) == (403, "forbidden_scope")
