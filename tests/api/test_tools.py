"""The tool layer over HTTP (the app in this process): catalog, execute, approvals
and the executions log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agent_server import AgentServer
from tests.helpers import APPROVER_TOKEN, TOKEN, new_conversation, tokens_setting
from tests.inprocess import InProcessService, in_process_service

AGENT: dict[str, Any] = {
    "id": "agent-1",
    "systemToolIds": ["sandbox", "js_executor", "orchestration"],
    "baseImage": "debian-base",
    "subAgents": ["echo"],
    "functionPolicies": {"runCommand": "confirm"},
    "connections": [
        {
            "id": "c1",
            "kind": "shared",
            "functions": [{"name": "Gmail.Send", "policy": "confirm", "description": "Send mail"}],
        }
    ],
}
USER = {"id": "user-1", "role": "User"}
ORG = "org-tools"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": ORG}
APPROVER = {**HEADERS, "Authorization": f"Bearer {APPROVER_TOKEN}"}
"""Another caller than the one that executes: the token that asks may not decide."""


@pytest.fixture(scope="module")
def agents() -> Iterator[AgentServer]:
    server = AgentServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def service(
    agents: AgentServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_AGENTS__GATEWAY__TYPE": "http",
        "SIESTA_AGENTS__GATEWAY__BACKEND_URL": f"{agents.url}/subagents",
        "SIESTA_TOKENS": tokens_setting(("approver", APPROVER_TOKEN, ["approve"])),
        "SIESTA_TOOLS__ORG_POLICIES": json.dumps(
            {"org-strict": {"functionPolicies": {"runCommand": "disabled"}}}
        ),
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def execute(
    service: InProcessService,
    conversation: str,
    function: str,
    arguments: dict[str, Any],
    agent: dict[str, Any] | None = None,
    headers: dict[str, str] = HEADERS,
    **fields: Any,
) -> dict[str, Any]:
    """``POST /v1/tools/execute`` (``fields``: more of its body, e.g. ``messageId``)."""
    response = service.client.post(
        "/v1/tools/execute",
        headers=headers,
        json={
            "conversationId": conversation,
            "agent": agent or AGENT,
            "user": USER,
            "function": function,
            "arguments": arguments,
            **fields,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def decide(service: InProcessService, approval_id: str, decision: str) -> Any:
    return service.client.post(
        f"/v1/tools/approvals/{approval_id}",
        headers=APPROVER,
        json={"decision": decision, "by": "admin-7"},
    )


def test_catalog_over_http(service: InProcessService) -> None:
    response = service.client.post(
        "/v1/tools/catalog", headers=HEADERS, json={"agent": AGENT, "user": USER, "org": ORG}
    )
    body = response.json()
    by_name = {f["name"]: f for f in body["functions"]}
    assert set(by_name) == {
        "runCommand",
        "writeFile",
        "readFile",
        "listFiles",
        "publishFiles",
        "JsExecutorAgent",
        "run_function_batch",
        "Gmail.Send",
    }
    assert by_name["runCommand"]["policy"] == "confirm"
    assert by_name["Gmail.Send"]["group"] == "Shared"
    assert by_name["readFile"]["parameters"]["required"] == ["path"]


def test_the_catalog_in_strict_form(service: InProcessService) -> None:
    response = service.client.post(
        "/v1/tools/catalog",
        headers=HEADERS,
        params={"schemaMode": "strict"},
        json={"agent": AGENT, "user": USER, "org": ORG},
    )
    assert response.status_code == 200, response.text
    read_file = {f["name"]: f for f in response.json()["functions"]}["readFile"]["parameters"]
    assert read_file["required"] == ["path", "maxBytes", "offset"]
    assert read_file["additionalProperties"] is False
    assert {"type": "null"} in read_file["properties"]["offset"]["anyOf"]
    refused = service.client.post(
        "/v1/tools/catalog",
        headers=HEADERS,
        params={"schemaMode": "loose"},
        json={"agent": AGENT, "user": USER, "org": ORG},
    )
    assert refused.status_code == 422


def test_a_strict_call_runs_on_every_path(service: InProcessService) -> None:
    """Optional arguments sent as null, as strict models send them: through the tool
    layer and through the direct routes, each runs as if they were left out."""
    conversation = new_conversation()
    agent = {**AGENT, "functionPolicies": {}}
    written = execute(
        service, conversation, "writeFile", {"path": "notes.txt", "content": "0123456789"}, agent
    )
    assert written["ok"] is True, written
    read = execute(
        service,
        conversation,
        "readFile",
        {"path": "notes.txt", "maxBytes": None, "offset": None},
        agent,
    )
    assert read["ok"] is True and read["result"]["content"] == "0123456789", read
    listed = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/listFiles",
        headers={**HEADERS, "X-Siesta-User": "user-1", "X-Siesta-Base-Image": "debian-base"},
        json={"path": None},
    )
    assert listed.status_code == 200, listed.text
    assert [e["name"] for e in listed.json()["entries"]] == ["notes.txt"]
    ran = execute(
        service,
        conversation,
        "runCommand",
        {"command": "cat notes.txt", "timeoutSeconds": None, "files": None},
        agent,
    )
    assert ran["ok"] is True and ran["result"]["timeoutSeconds"] == 60, ran


def test_an_approver_sees_the_complete_call_that_will_run(service: InProcessService) -> None:
    """The log cuts texts at 4,096 characters; the approval shows what runs, whole."""
    conversation = new_conversation()
    command = "echo " + "x" * 20_000 + " > big.txt; wc -c < big.txt"
    content = "line\n" * 40_000  # 200,000 bytes
    agent = {**AGENT, "functionPolicies": {"runCommand": "confirm", "writeFile": "confirm"}}
    ran = execute(service, conversation, "runCommand", {"command": command}, agent)
    wrote = execute(
        service, conversation, "writeFile", {"path": "a.txt", "content": content}, agent
    )
    listed = service.client.get(
        "/v1/tools/approvals", headers=APPROVER, params={"conversationId": conversation}
    )
    assert listed.status_code == 200, listed.text
    entries = listed.json()["approvals"]
    assert [e["approvalId"] for e in entries] == [
        ran["error"]["approvalId"],
        wrote["error"]["approvalId"],
    ]
    first = entries[0]
    assert first["function"] == "runCommand" and first["source"] == "system:sandbox"
    assert (first["conversationId"], first["agentId"], first["userId"]) == (
        conversation,
        "agent-1",
        "user-1",
    )
    assert first["requestedBy"] == "api-token" and first["policy"] == "confirm"
    assert first["policyReason"] == "the agent's configuration"
    assert first["expiresAt"] == ran["error"]["expiresAt"] > first["requestedAt"]
    assert first["argumentsComplete"] is False  # a list cuts long texts as the log does
    assert f"cut in the log: {len(command)} characters" in first["arguments"]["command"]
    assert first["argumentsBytes"] == len(f'{{"command": "{command}"}}')

    whole = service.client.get(f"/v1/tools/approvals/{first['approvalId']}", headers=APPROVER)
    assert whole.status_code == 200, whole.text
    assert whole.json()["arguments"] == {"command": command}
    assert whole.json()["argumentsComplete"] is True and whole.json()["maskedKeys"] == []

    write = service.client.get(
        f"/v1/tools/approvals/{wrote['error']['approvalId']}", headers=APPROVER
    ).json()
    assert write["arguments"]["content"] == content
    assert write["writeFile"] == {
        "path": "a.txt",
        "sizeBytes": 200_000,
        "head": content[:2000],
        "headChars": 2000,
    }

    assert decide(service, first["approvalId"], "approve").json()["result"]["stdout"] == "20001\n"
    decided = service.client.get(f"/v1/tools/approvals/{first['approvalId']}", headers=APPROVER)
    assert decided.status_code == 409
    assert decided.json()["error"]["code"] == "approval_already_decided"
    left = service.client.get(
        "/v1/tools/approvals", headers=APPROVER, params={"conversationId": conversation}
    ).json()["approvals"]
    assert [e["function"] for e in left] == ["writeFile"]


def test_an_approval_masks_only_what_names_a_secret(service: InProcessService) -> None:
    conversation = new_conversation()
    held = execute(
        service,
        conversation,
        "Gmail.Send",
        {"to": "a@b.c", "auth": {"apiKey": "s3cret-value", "scope": "mail"}},
    )
    shown = service.client.get(
        f"/v1/tools/approvals/{held['error']['approvalId']}", headers=APPROVER
    ).json()
    assert "s3cret-value" not in str(shown)
    assert shown["arguments"] == {"to": "a@b.c", "auth": {"apiKey": "[redacted]", "scope": "mail"}}
    assert shown["maskedKeys"] == ["auth.apiKey"]
    assert shown["source"] == "connection:c1"


def test_published_files_belong_to_the_calls_assistant_message(
    service: InProcessService,
) -> None:
    """The backend says which assistant message a call belongs to (the model cannot
    know it): a header on the direct routes, ``messageId`` on /v1/tools/execute, kept
    while a call waits for approval."""
    conversation = new_conversation()
    direct = {**HEADERS, "X-Siesta-User": "user-1", "X-Siesta-Base-Image": "debian-base"}
    agent = {**AGENT, "functionPolicies": {"publishFiles": "confirm"}}
    for name in ("a.txt", "b.txt", "c.txt"):
        written = service.client.post(
            f"/v1/conversations/{conversation}/sandbox/writeFile",
            headers=direct,
            json={"path": name, "content": name},
        )
        assert written.status_code == 200, written.text
    published = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/publishFiles",
        headers={**direct, "X-Siesta-Message-Id": "msg-direct"},
        json={"paths": ["a.txt"]},
    )
    assert published.status_code == 200, published.text
    assert published.json()["files"][0]["artifact"]["messageId"] == "msg-direct"
    held = execute(
        service, conversation, "publishFiles", {"paths": ["b.txt"]}, agent, messageId="msg-7"
    )
    approved = decide(service, held["error"]["approvalId"], "approve").json()
    assert approved["result"]["files"][0]["artifact"]["messageId"] == "msg-7"
    untied = execute(
        service,
        conversation,
        "publishFiles",
        {"paths": ["c.txt"]},
        {**AGENT, "functionPolicies": {}},
    )
    assert untied["result"]["files"][0]["artifact"]["messageId"] is None
    files = service.client.get(f"/v1/conversations/{conversation}/files", headers=direct).json()
    tied = {f["name"]: f["messageId"] for f in files["files"] if f["kind"] == "artifact"}
    assert tied == {"a.txt": "msg-direct", "b.txt": "msg-7", "c.txt": None}
    refused = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/publishFiles",
        headers={**direct, "X-Siesta-Message-Id": "a/b"},
        json={"paths": ["a.txt"]},
    )
    assert refused.status_code == 422, refused.text


def test_an_organizations_policy_holds_on_every_path(service: InProcessService) -> None:
    """org-strict disabled runCommand for its agents: the catalog, the tool layer and
    the direct route all say so; another org is not touched."""
    strict = {**HEADERS, "X-Siesta-Org": "org-strict"}
    agent = {**AGENT, "functionPolicies": {"runCommand": "enabled"}}
    listed = service.client.post(
        "/v1/tools/catalog",
        headers=HEADERS,
        json={"agent": agent, "user": USER, "org": "org-strict"},
    ).json()
    assert "runCommand" not in [f["name"] for f in listed["functions"]]
    conversation = new_conversation()
    refused = execute(service, conversation, "runCommand", {"command": "true"}, agent, strict)
    assert refused["ok"] is False and refused["error"]["code"] == "function_not_available"
    direct = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        headers={**strict, "X-Siesta-User": "user-1", "X-Siesta-Base-Image": "debian-base"},
        json={"command": "true"},
    )
    assert direct.status_code == 403, direct.text
    assert "the organization's policy" in direct.json()["error"]["message"]
    elsewhere = execute(service, conversation, "runCommand", {"command": "true"}, agent)
    assert elsewhere["ok"] is True


def test_approval_round_trip_runs_once_and_records_the_approver(service: InProcessService) -> None:
    conversation = new_conversation()
    requested = execute(
        service, conversation, "runCommand", {"command": "echo ran >> count.txt; wc -l < count.txt"}
    )
    approval_id = requested["error"]["approvalId"]
    approved = decide(service, approval_id, "approve")
    replayed = decide(service, approval_id, "approve")
    log = service.client.get(
        "/v1/tools/executions", headers=HEADERS, params={"conversationId": conversation}
    ).json()["executions"]

    assert requested["ok"] is False and requested["status"] == "pending_approval"
    assert requested["error"]["code"] == "approval_required"
    assert approved.status_code == 200
    assert approved.json()["ok"] is True and approved.json()["result"]["stdout"] == "1\n"
    assert replayed.status_code == 409
    assert replayed.json()["error"]["code"] == "approval_already_decided"
    assert len(log) == 1
    entry = log[0]
    assert entry["status"] == "succeeded" and entry["function"] == "runCommand"
    assert entry["approval"]["decision"] == "approved" and entry["approval"]["by"] == "admin-7"
    assert entry["approval"]["token"] == "approver" and entry["requestedBy"] == "api-token"
    assert entry["result"]["exitCode"] == 0 and entry["durationMs"] >= 0
    again = execute(service, conversation, "readFile", {"path": "count.txt"})
    assert again["result"]["content"] == "ran\n"  # it ran exactly once


def test_a_denied_call_never_runs(service: InProcessService) -> None:
    conversation = new_conversation()
    requested = execute(service, conversation, "runCommand", {"command": "touch ran.txt"})
    denied = decide(service, requested["error"]["approvalId"], "deny").json()
    listing = execute(service, conversation, "listFiles", {})

    assert denied["ok"] is False and denied["status"] == "denied"
    assert denied["error"]["code"] == "approval_denied"
    assert "ran.txt" not in [entry["name"] for entry in listing["result"]["entries"]]
    log = service.client.get(
        "/v1/tools/executions", headers=HEADERS, params={"status": "denied"}
    ).json()["executions"]
    assert any(e["id"] == requested["executionId"] for e in log)


def test_failures_are_results_never_500(service: InProcessService) -> None:
    conversation = new_conversation()
    unknown = execute(service, conversation, "Platform_CreateAgent", {"name": "x"})
    bad_arguments = execute(service, conversation, "readFile", {"pathh": "x"})
    missing_file = execute(service, conversation, "readFile", {"path": "nope.txt"})
    script_error = execute(service, conversation, "JsExecutorAgent", {"code": "log(1); null.x"})

    assert unknown["error"]["code"] == "function_not_available"
    assert bad_arguments["error"]["code"] == "invalid_arguments"
    assert "path: Field required" in bad_arguments["error"]["message"]
    assert missing_file["error"]["code"] == "file_not_found"
    assert script_error["error"]["code"] == "js_error" and script_error["error"]["logs"] == ["1"]
    assert all(r["ok"] is False for r in (unknown, bad_arguments, missing_file, script_error))


def test_secrets_are_redacted_in_the_log(service: InProcessService) -> None:
    conversation = new_conversation()
    execute(
        service,
        conversation,
        "Gmail.Send",
        {"to": "a@b.c", "apiKey": "sk-123", "auth": {"password": "hunter2"}},
    )
    entry = service.client.get(
        "/v1/tools/executions", headers=HEADERS, params={"conversationId": conversation}
    ).json()["executions"][0]
    assert entry["arguments"] == {
        "to": "a@b.c",
        "apiKey": "[redacted]",
        "auth": {"password": "[redacted]"},
    }
    assert entry["status"] == "pending_approval"


def test_batch_runs_each_input_through_the_gateway(service: InProcessService) -> None:
    result = execute(
        service,
        new_conversation(),
        "run_function_batch",
        {"functionName": "echo", "input": ["a", "b", "c"]},
    )
    assert result["ok"] is True
    assert [r["response"] for r in result["result"]["results"]] == ["echo: a", "echo: b", "echo: c"]
    assert result["result"]["failed"] == 0


def test_batch_reports_failures_in_place_and_refuses_bad_input(service: InProcessService) -> None:
    conversation = new_conversation()
    mixed = execute(
        service,
        conversation,
        "run_function_batch",
        {"functionName": "fail", "input": ["x"]},
        {**AGENT, "subAgents": ["echo", "fail"]},
    )
    bad = execute(
        service, conversation, "run_function_batch", {"functionName": "echo", "input": "not a list"}
    )
    assert mixed["ok"] is True and mixed["result"]["failed"] == 1
    assert "HTTP 500" in mixed["result"]["results"][0]["error"]
    assert bad["error"]["code"] == "invalid_arguments"


def test_executions_filter_by_function_and_time(service: InProcessService) -> None:
    conversation = new_conversation()
    execute(service, conversation, "listFiles", {})
    execute(service, conversation, "JsExecutorAgent", {"code": "1"})
    by_function = service.client.get(
        "/v1/tools/executions",
        headers=HEADERS,
        params={"conversationId": conversation, "function": "JsExecutorAgent"},
    ).json()["executions"]
    future = service.client.get(
        "/v1/tools/executions",
        headers=HEADERS,
        params={"conversationId": conversation, "since": 4e9},
    ).json()["executions"]
    other_org = service.client.get(
        "/v1/tools/executions", headers={**HEADERS, "X-Siesta-Org": "someone-else"}
    ).json()["executions"]
    assert [e["function"] for e in by_function] == ["JsExecutorAgent"]
    assert future == [] and other_org == []


def test_bad_tool_requests(service: InProcessService) -> None:
    no_org = service.client.post(
        "/v1/tools/execute",
        headers={"Authorization": HEADERS["Authorization"]},
        json={"conversationId": "c", "agent": AGENT, "user": USER, "function": "x"},
    )
    bad_role = service.client.post(
        "/v1/tools/catalog",
        headers=HEADERS,
        json={"agent": AGENT, "user": {"id": "u", "role": "Superuser"}, "org": ORG},
    )
    unknown_tool = service.client.post(
        "/v1/tools/catalog",
        headers=HEADERS,
        json={"agent": {**AGENT, "systemToolIds": ["teleport"]}, "user": USER, "org": ORG},
    )
    missing = decide(service, "no-such-approval", "approve")
    assert no_org.status_code == 400 and no_org.json()["error"]["code"] == "missing_context"
    assert bad_role.status_code == 422 and unknown_tool.status_code == 422
    assert missing.status_code == 404


def test_a_cancelled_approval_is_a_410_the_document_lists(service: InProcessService) -> None:
    """Deleting its conversation cancels a held call: showing or deciding it is 410
    ``approval_cancelled``, which the document lists for both, with the error body."""
    conversation = new_conversation()
    held = execute(service, conversation, "runCommand", {"command": "true"})
    approval_id = held["error"]["approvalId"]
    deleted = service.client.delete(
        f"/v1/conversations/{conversation}", headers={**HEADERS, "X-Siesta-User": "user-1"}
    )
    shown = service.client.get(f"/v1/tools/approvals/{approval_id}", headers=APPROVER)
    decided = decide(service, approval_id, "approve")
    route = service.client.get("/openapi.json").json()["paths"]["/v1/tools/approvals/{approval_id}"]

    assert deleted.status_code == 200 and deleted.json()["deleted"] is True, deleted.text
    for method, answer in (("get", shown), ("post", decided)):
        assert answer.status_code == 410, answer.text
        assert answer.json()["error"]["code"] == "approval_cancelled"
        listed = route[method]["responses"][str(answer.status_code)]
        assert "approval_cancelled" in listed["description"]
        assert listed["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorResponse"
        }


def test_a_held_calls_answer_names_the_route_that_decides_it(service: InProcessService) -> None:
    """A held call's 202 points to the route that decides it."""
    paths = service.client.get("/openapi.json").json()["paths"]
    held = paths["/v1/conversations/{conversation_id}/sandbox/runCommand"]["post"]["responses"]

    assert "post" in paths["/v1/tools/approvals/{approval_id}"]
    assert "`POST /v1/tools/approvals/{id}`" in held["202"]["description"]
