"""A token bound to an org (or a user) acts there only, on every face; an unbound one
names the org per call. The every-route matrix is ``test_tenancy.py``; these are the
manual's configurations (docs/concepts/tenancy.md), tried as an operator would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from starlette.testclient import TestClient, WebSocketDenialResponse

from runtime.core.settings import TokenSettings
from tests.helpers import tokens_setting
from tests.inprocess import InProcessService, in_process_service

TENANT_A = "tenant-a-" + uuid.uuid4().hex
TENANT_B = "tenant-b-" + uuid.uuid4().hex
TWO_ORGS = "two-orgs-" + uuid.uuid4().hex
ANY_ORG = "any-org-" + uuid.uuid4().hex
BOUND_ADMIN = "bound-admin-" + uuid.uuid4().hex
SECRET = "TOP-SECRET-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    tokens = tokens_setting(
        ("tenant-a", TENANT_A, ["sandbox"], "org-a"),
        ("tenant-b", TENANT_B, ["sandbox", "shell"], "org-b"),
        ("two-orgs", TWO_ORGS, ["sandbox", "tools"], {"orgs": ["org-c", "org-d"]}),
        ("any-org", ANY_ORG, ["sandbox"], {"orgs": ["*"]}),
        ("bound-admin", BOUND_ADMIN, ["admin", "sandbox"], "org-a"),
    )
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_TOKENS": tokens}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def as_token(token: str, org: str | None = None, user: str = "user-1") -> dict[str, str]:
    found = {
        "Authorization": f"Bearer {token}",
        "X-Siesta-User": user,
        "X-Siesta-Base-Image": "debian-base",
    }
    return {**found, "X-Siesta-Org": org} if org else found


def test_another_tenants_token_naming_its_org_is_refused(service: InProcessService) -> None:
    """The issue's two-token run: tenant-b's own token, naming org-a, reads nothing."""
    client, url = service.client, "/v1/conversations/victim/sandbox"
    written = client.post(
        f"{url}/writeFile",
        headers=as_token(TENANT_A, "org-a"),
        json={"path": "secret.txt", "content": SECRET},
    )
    assert written.status_code == 200, written.text
    stolen = client.post(
        f"{url}/readFile", headers=as_token(TENANT_B, "org-a"), json={"path": "secret.txt"}
    )
    assert stolen.status_code == 403, stolen.text
    error = stolen.json()["error"]
    assert (error["code"], error["org"], error["token"]) == ("org_not_allowed", "org-b", "tenant-b")
    assert SECRET not in stolen.text
    own = client.post(f"{url}/readFile", headers=as_token(TENANT_B), json={"path": "secret.txt"})
    assert own.status_code == 404, own.text  # org-b's own conversation "victim": no such file
    assert SECRET not in own.text
    mine = client.post(f"{url}/readFile", headers=as_token(TENANT_A), json={"path": "secret.txt"})
    assert mine.json()["content"] == SECRET  # a bound token naming no org acts in its own


def test_a_token_of_several_orgs_names_one_of_them(service: InProcessService) -> None:
    client, url = service.client, "/v1/conversations/c/sandbox/listFiles"
    assert client.post(url, headers=as_token(TWO_ORGS, "org-c"), json={}).status_code == 200
    assert client.post(url, headers=as_token(TWO_ORGS, "org-d"), json={}).status_code == 200
    other = client.post(url, headers=as_token(TWO_ORGS, "org-a"), json={})
    assert (other.status_code, other.json()["error"]["code"]) == (403, "org_not_allowed")
    none = client.post(url, headers=as_token(TWO_ORGS), json={})
    assert (none.status_code, none.json()["error"]["code"]) == (400, "missing_context")
    executions = client.get("/v1/tools/executions", headers=as_token(TWO_ORGS, "org-a"))
    assert executions.status_code == 403, executions.text


def test_a_token_of_any_org_says_so(service: InProcessService) -> None:
    url = "/v1/conversations/c/sandbox/listFiles"
    for org in ("org-a", "org-z"):
        answer = service.client.post(url, headers=as_token(ANY_ORG, org), json={})
        assert answer.status_code == 200, answer.text


def test_an_org_bound_admin_token_is_refused_deployment_wide_routes(
    service: InProcessService,
) -> None:
    client = service.client
    listed = client.get("/v1/admin/images", headers=as_token(BOUND_ADMIN))
    assert (listed.status_code, listed.json()["error"]["code"]) == (403, "org_not_allowed")
    assert "spans every org" in listed.json()["error"]["message"]
    signed_in = client.post("/console/sign-in", data={"token": BOUND_ADMIN}, follow_redirects=False)
    assert signed_in.status_code == 401
    assert "bound to some orgs" in signed_in.text
    assert "set-cookie" not in signed_in.headers


def test_mcp_takes_the_org_from_the_token(service: InProcessService) -> None:
    headers = {**as_token(TENANT_B, "org-a"), "X-Siesta-Conversation": "victim"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    refused = service.client.post(
        "/mcp",
        headers={**headers, "Accept": "application/json, text/event-stream"},
        json=body,
    )
    assert refused.status_code == 403, refused.text
    assert "org_not_allowed" in refused.text


@pytest.mark.parametrize(
    "entry",
    [
        {"org": "org-a", "orgs": ["org-b"]},
        {"orgs": ["*", "org-a"]},
        {"orgs": []},
        {"orgs": ["not an id!"]},
        {"user": "not an id!"},
    ],
)
def test_a_token_binding_that_says_two_things_is_refused_at_start(entry: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        TokenSettings.model_validate(
            {"name": "t", "sha256": "0" * 64, "scopes": ["sandbox"], **entry}
        )


def test_the_terminal_takes_the_org_from_the_token(service: InProcessService) -> None:
    """The WebSocket face: refused before the upgrade, as an HTTP route refuses."""
    client = TestClient(service.client.app)
    headers = as_token(TENANT_B, "org-a")
    with (
        pytest.raises(WebSocketDenialResponse) as refused,
        client.websocket_connect("/v1/conversations/victim/sandbox/terminal", headers=headers),
    ):
        pass
    assert refused.value.status_code == 403
    assert refused.value.json()["error"]["code"] == "org_not_allowed"
