"""Registered agents: one policy per agent, whatever the path.

An agent registered with ``POST /v1/agents`` binds every call that names it by
``X-Siesta-Agent``: the direct sandbox routes and ``/js`` apply its
``functionPolicies`` and System Tools exactly as ``/v1/tools/execute`` applies the
same configuration sent in its body (``/mcp`` in tests/api/test_mcp.py). Through
the app in this process with the in-package fake provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.helpers import headers, new_conversation
from tests.inprocess import InProcessService, in_process_service

CAREFUL: dict[str, Any] = {
    "id": "careful",
    "systemToolIds": ["sandbox", "js_executor"],
    "baseImage": "python",
    "functionPolicies": {"runCommand": "confirm", "listFiles": "disabled"},
}
USER = {"id": "user-1", "role": "User"}
TRUSTING = "org-trusting"
"""An org whose policy holds ``runCommand`` for its agents, except ``agent-x``."""
TRUSTING_POLICY = {
    TRUSTING: {
        "functionPolicies": {"runCommand": "confirm"},
        "trustedAgents": {"runCommand": ["agent-x"]},
    }
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOOLS__MAX_REGISTERED_AGENTS": "3",
        "SIESTA_TOOLS__ORG_POLICIES": json.dumps(TRUSTING_POLICY),
    }
    with in_process_service(tmp_path_factory.mktemp("data"), env) as running:
        yield running


@pytest.fixture
def org() -> str:
    """A new org per test: registrations and limits do not leak between tests."""
    return f"org-{new_conversation()}"


def register(service: InProcessService, org: str, agent: dict[str, Any]) -> httpx2.Response:
    return service.client.post("/v1/agents", headers=headers(org), json=agent)


def direct(
    service: InProcessService,
    org: str,
    conversation: str,
    route: str,
    body: dict[str, Any],
    agent: str | None = "careful",
    image: str | None = None,
) -> httpx2.Response:
    sent = headers(org, image=image)
    if agent is not None:
        sent["X-Siesta-Agent"] = agent
    return service.client.post(f"/v1/conversations/{conversation}{route}", headers=sent, json=body)


def approval(service: InProcessService, org: str, approval_id: str) -> dict[str, Any]:
    found = service.client.get(f"/v1/tools/approvals/{approval_id}", headers=headers(org))
    assert found.status_code == 200, found.text
    body: dict[str, Any] = found.json()
    return body


def test_a_registration_is_the_orgs_and_can_be_replaced_and_deleted(
    service: InProcessService, org: str
) -> None:
    put = register(service, org, CAREFUL)
    assert put.status_code == 200, put.text
    assert put.json()["agent"]["functionPolicies"] == CAREFUL["functionPolicies"]
    assert put.json()["updatedBy"]

    relaxed = {**CAREFUL, "functionPolicies": {}}
    assert register(service, org, relaxed).status_code == 200
    listed = service.client.get("/v1/agents", headers=headers(org)).json()
    assert [(a["agent"]["id"], a["agent"]["functionPolicies"]) for a in listed["agents"]] == [
        ("careful", {})
    ]
    assert service.client.get("/v1/agents", headers=headers("org-z")).json() == {"agents": []}
    other = service.client.get("/v1/agents/careful", headers=headers("org-z"))
    assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
    assert service.client.delete("/v1/agents/careful", headers=headers("org-z")).status_code == 404

    assert service.client.delete("/v1/agents/careful", headers=headers(org)).status_code == 204
    gone = service.client.get("/v1/agents/careful", headers=headers(org))
    assert gone.status_code == 404


def test_an_agent_id_is_a_plain_id_and_an_org_has_a_limit(
    service: InProcessService, org: str
) -> None:
    bad_id = register(service, org, {**CAREFUL, "id": "a/b"})
    assert bad_id.status_code == 422, bad_id.text

    for n in range(3):
        assert register(service, org, {**CAREFUL, "id": f"agent-{n}"}).status_code == 200
    refused = register(service, org, CAREFUL)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "agent_limit_reached" and error["limit"] == 3
    assert "SIESTA_TOOLS__MAX_REGISTERED_AGENTS" in error["message"]
    assert register(service, org, {**CAREFUL, "id": "agent-0"}).status_code == 200  # replaced


def test_the_direct_routes_apply_the_registered_agents_policies(
    service: InProcessService, org: str
) -> None:
    assert register(service, org, CAREFUL).status_code == 200
    conversation = new_conversation()

    held = direct(service, org, conversation, "/sandbox/runCommand", {"command": "echo hi"})
    off = direct(service, org, conversation, "/sandbox/listFiles", {})
    written = direct(
        service, org, conversation, "/sandbox/writeFile", {"path": "a", "content": "x"}
    )
    unregistered = direct(
        service, org, conversation, "/sandbox/runCommand", {"command": "echo hi"}, agent="anon"
    )

    assert held.status_code == 202, held.text
    assert held.json()["error"]["code"] == "approval_required"
    view = approval(service, org, held.json()["error"]["approvalId"])
    assert view["policyReason"] == "the agent's configuration"
    assert view["agentId"] == "careful"
    assert off.status_code == 403 and off.json()["error"]["code"] == "function_not_available"
    assert "the agent's configuration" in off.json()["error"]["message"]
    assert written.status_code == 200, written.text
    assert unregistered.status_code == 200, unregistered.text  # the deployment's floor


def test_a_direct_call_is_held_exactly_as_the_same_agent_on_tools_execute(
    service: InProcessService, org: str
) -> None:
    assert register(service, org, CAREFUL).status_code == 200
    conversation = new_conversation()
    direct_call = direct(service, org, conversation, "/sandbox/runCommand", {"command": "id"})
    executed = service.client.post(
        "/v1/tools/execute",
        headers=headers(org),
        json={
            "conversationId": conversation,
            "agent": CAREFUL,
            "user": USER,
            "function": "runCommand",
            "arguments": {"command": "id"},
        },
    )
    catalog = service.client.post(
        "/v1/tools/catalog",
        headers=headers(org),
        json={"agent": CAREFUL, "user": USER, "org": org},
    ).json()

    assert executed.status_code == 200, executed.text
    assert executed.json()["error"]["code"] == "approval_required"
    by_route = approval(service, org, direct_call.json()["error"]["approvalId"])
    by_execute = approval(service, org, executed.json()["error"]["approvalId"])
    listed = {f["name"]: f for f in catalog["functions"]}
    assert by_route["policyReason"] == by_execute["policyReason"]
    assert listed["runCommand"]["policyReason"] == by_route["policyReason"]
    assert "listFiles" not in listed


def test_an_agent_calls_only_the_system_tools_it_has(service: InProcessService, org: str) -> None:
    reader = {"id": "reader", "systemToolIds": ["content"]}
    assert register(service, org, reader).status_code == 200
    conversation = new_conversation()

    command = direct(service, org, conversation, "/sandbox/runCommand", {"command": "id"}, "reader")
    script = direct(service, org, conversation, "/js", {"code": "1 + 1"}, "reader")

    for refused, tool in ((command, "sandbox"), (script, "js_executor")):
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "function_not_available"
        assert "'reader'" in error["message"] and tool in error["message"]


def test_the_registered_base_image_is_used_and_a_header_may_not_contradict_it(
    service: InProcessService, org: str
) -> None:
    assert register(service, org, {**CAREFUL, "functionPolicies": {}}).status_code == 200
    conversation = new_conversation()

    ran = direct(service, org, conversation, "/sandbox/runCommand", {"command": "id"})
    sandbox = service.client.get(
        f"/v1/conversations/{conversation}/sandbox",
        headers={**headers(org, image=None), "X-Siesta-Agent": "careful"},
    )
    contradicted = direct(
        service, org, new_conversation(), "/sandbox/runCommand", {"command": "id"}, image="base"
    )
    repeated = direct(
        service, org, new_conversation(), "/sandbox/runCommand", {"command": "id"}, image="python"
    )

    assert ran.status_code == 200, ran.text
    assert sandbox.json()["imageId"] == "python"
    assert contradicted.status_code == 400
    assert contradicted.json()["error"]["code"] == "invalid_context"
    assert "X-Siesta-Base-Image" in contradicted.json()["error"]["message"]
    assert repeated.status_code == 200, repeated.text


def test_deleting_a_registration_brings_back_the_floors(
    service: InProcessService, org: str
) -> None:
    assert register(service, org, CAREFUL).status_code == 200
    conversation = new_conversation()
    held = direct(service, org, conversation, "/sandbox/runCommand", {"command": "id"})
    assert service.client.delete("/v1/agents/careful", headers=headers(org)).status_code == 204
    ran = direct(
        service, org, conversation, "/sandbox/runCommand", {"command": "id"}, image="python"
    )

    assert held.status_code == 202
    assert ran.status_code == 200, ran.text
    still_held = approval(service, org, held.json()["error"]["approvalId"])
    assert still_held["policyReason"] == "the agent's configuration"


def test_an_org_trusts_an_agent_only_once_it_is_registered_there(
    service: InProcessService,
) -> None:
    """``trustedAgents`` names agents of the org: a caller that merely states the id
    (``X-Siesta-Agent``, or the body's agent) gets the org's floor like any other."""
    agent_x = {"id": "agent-x", "systemToolIds": ["sandbox"], "baseImage": "python"}
    conversation = new_conversation()

    def run_command() -> tuple[httpx2.Response, httpx2.Response, dict[str, Any]]:
        command = {"command": "id"}
        routed = direct(
            service, TRUSTING, conversation, "/sandbox/runCommand", command, "agent-x", "python"
        )
        executed = service.client.post(
            "/v1/tools/execute",
            headers=headers(TRUSTING),
            json={
                "conversationId": conversation,
                "agent": agent_x,
                "user": USER,
                "function": "runCommand",
                "arguments": command,
            },
        )
        listed = service.client.post(
            "/v1/tools/catalog",
            headers=headers(TRUSTING),
            json={"agent": agent_x, "user": USER, "org": TRUSTING},
        ).json()
        return routed, executed, {f["name"]: f for f in listed["functions"]}["runCommand"]

    stated = run_command()
    assert register(service, TRUSTING, agent_x).status_code == 200
    registered = run_command()
    assert service.client.delete("/v1/agents/agent-x", headers=headers(TRUSTING)).status_code == 204
    unregistered = run_command()

    for routed, executed, listed in (stated, unregistered):
        assert routed.status_code == 202, routed.text
        assert routed.json()["error"]["code"] == "approval_required"
        held = approval(service, TRUSTING, routed.json()["error"]["approvalId"])
        assert held["policyReason"] == "the organization's policy"
        assert executed.json()["status"] == "pending_approval", executed.text
        assert (listed["policy"], listed["policyReason"]) == (
            "confirm",
            "the organization's policy",
        )
    routed, executed, listed = registered
    assert routed.status_code == 200, routed.text
    assert executed.json()["ok"] is True, executed.text
    assert (listed["policy"], listed["policyReason"]) == ("enabled", "default")
