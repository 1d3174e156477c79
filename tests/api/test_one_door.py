"""The tool routes decide by what the org and its registered agents say, never by what a
request body claims: a body's agent configuration cannot loosen a registered agent's
policies, and a catalog is always an org's (its policies apply)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from tests.helpers import TOKEN
from tests.inprocess import InProcessService, in_process_service

ORG = "org-door"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG, "X-Siesta-User": "user-1"}
USER = {"id": "user-1", "role": "User"}
CAREFUL_ORG = "org-careful"
"""An org whose own policy holds runCommand for a person's approval."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOOLS__ORG_POLICIES": json.dumps(
            {
                ORG: {"functionPolicies": {"publishFiles": "disabled"}},
                CAREFUL_ORG: {"functionPolicies": {"runCommand": "confirm"}},
            }
        ),
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def test_a_body_cannot_loosen_a_registered_agents_policy(service: InProcessService) -> None:
    registered = {
        "id": "careful",
        "systemToolIds": ["sandbox"],
        "baseImage": "debian-base",
        "functionPolicies": {"writeFile": "confirm"},
    }
    made = service.client.post("/v1/agents", headers=HEADERS, json=registered)
    assert made.status_code == 200, made.text
    claimed = {**registered, "functionPolicies": {"writeFile": "enabled"}}
    outcome = service.client.post(
        "/v1/tools/execute",
        headers=HEADERS,
        json={
            "conversationId": f"c-{uuid.uuid4().hex[:8]}",
            "agent": claimed,
            "user": USER,
            "function": "writeFile",
            "arguments": {"path": "a.txt", "content": "x"},
        },
    )
    assert outcome.status_code == 200, outcome.text
    assert outcome.json()["status"] == "pending_approval"  # the registration's confirm
    catalog = service.client.post(
        "/v1/tools/catalog", headers=HEADERS, json={"agent": claimed, "user": USER, "org": ORG}
    )
    policies = {f["name"]: f["policy"] for f in catalog.json()["functions"]}
    assert policies["writeFile"] == "confirm"


def test_a_catalog_is_always_an_orgs(service: InProcessService) -> None:
    agent = {"id": "any", "systemToolIds": ["sandbox"], "baseImage": "debian-base"}
    unnamed = service.client.post(
        "/v1/tools/catalog", headers=HEADERS, json={"agent": agent, "user": USER}
    )
    assert unnamed.status_code == 422, unnamed.text  # the body must name its org
    named = service.client.post(
        "/v1/tools/catalog", headers=HEADERS, json={"agent": agent, "user": USER, "org": ORG}
    )
    names = {f["name"] for f in named.json()["functions"]}
    assert "writeFile" in names and "publishFiles" not in names  # the org's floor


@pytest.mark.parametrize("whose", ["the org's", "a registered agent's"])
def test_a_run_command_confirm_holds_a_process_start_and_a_terminal(
    service: InProcessService, whose: str
) -> None:
    """The deployment's floor is held on Docker (tests/e2b/test_door_docker.py); the org's
    and a registered agent's hold the same way, before anything starts."""
    headers = {**HEADERS, "X-Siesta-Base-Image": "debian-base"}
    if whose == "the org's":
        headers["X-Siesta-Org"] = CAREFUL_ORG
    else:
        agent = {
            "id": "holds-commands",
            "systemToolIds": ["sandbox"],
            "baseImage": "debian-base",
            "functionPolicies": {"runCommand": "confirm"},
        }
        assert service.client.post("/v1/agents", headers=HEADERS, json=agent).status_code == 200
        headers["X-Siesta-Agent"] = "holds-commands"
    conversation = f"/v1/conversations/c-{uuid.uuid4().hex[:8]}/sandbox"
    started = service.client.post(
        f"{conversation}/processes", headers=headers, json={"command": "echo hi"}
    )
    assert started.status_code == 202, started.text
    assert started.json()["error"]["code"] == "approval_required"
    client = TestClient(service.client.app)
    with (
        pytest.raises(WebSocketDenialResponse) as refused,
        client.websocket_connect(f"{conversation}/terminal", headers=headers),
    ):
        pass
    assert refused.value.status_code == 202
    log = service.client.get(
        "/v1/tools/executions",
        headers={**HEADERS, "X-Siesta-Org": headers["X-Siesta-Org"]},
        params={"conversationId": conversation.split("/")[3]},
    ).json()["executions"]
    assert sorted((e["function"], e["status"]) for e in log) == [
        ("openTerminal", "pending_approval"),
        ("startProcess", "pending_approval"),
    ]
