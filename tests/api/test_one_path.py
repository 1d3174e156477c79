"""One path, one log: the direct sandbox and JavaScript routes go through the same
policy check and executions log as ``/v1/tools/execute``, and ``/v1/tools/execute``
streams a call's statuses while it runs.

Real ``siesta-runtime serve`` processes with the in-package fake provider: the
streaming test needs a real HTTP server (the in-process test client delivers a
response only when it is complete).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.helpers import (
    APPROVER_TOKEN,
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    tokens_setting,
)

AGENT_HEADERS = {**headers(), "X-Siesta-Agent": "agent-direct"}
APPROVER = {**AGENT_HEADERS, "Authorization": f"Bearer {APPROVER_TOKEN}"}
APPROVER_TOKENS = tokens_setting(("approver", APPROVER_TOKEN, ["approve"]))
AGENT: dict[str, Any] = {
    "id": "agent-1",
    "systemToolIds": ["sandbox", "js_executor"],
    "baseImage": "debian-base",
}
USER = {"id": "user-1", "role": "User"}


@pytest.fixture(scope="module")
def plain(start_service: StartService) -> ServiceProcess:
    """The test services' usual policies (publishing without approval)."""
    return start_service("fake", SIESTA_TOKENS=APPROVER_TOKENS)


@pytest.fixture(scope="module")
def strict(start_service: StartService) -> ServiceProcess:
    """Deployment policies: runCommand asks first, listFiles is off; publishFiles
    follows the reference's default (asks first)."""
    policies = {"runCommand": "confirm", "listFiles": "disabled"}
    return start_service(
        "fake",
        SIESTA_TOKENS=APPROVER_TOKENS,
        SIESTA_TOOLS__FUNCTION_POLICIES=json.dumps(policies),
    )


def direct(
    service: ServiceProcess, conversation: str, route: str, body: dict[str, Any]
) -> httpx.Response:
    return service.client.post(
        f"/v1/conversations/{conversation}/{route}", headers=AGENT_HEADERS, json=body
    )


def log_of(service: ServiceProcess, conversation: str) -> list[dict[str, Any]]:
    response = service.client.get(
        "/v1/tools/executions", headers=AGENT_HEADERS, params={"conversationId": conversation}
    )
    assert response.status_code == 200, response.text
    executions: list[dict[str, Any]] = response.json()["executions"]
    return executions


def execute(
    service: ServiceProcess,
    conversation: str,
    function: str,
    arguments: dict[str, Any],
    **agent: Any,
) -> dict[str, Any]:
    response = service.client.post(
        "/v1/tools/execute",
        headers=AGENT_HEADERS,
        json={
            "conversationId": conversation,
            "agent": {**AGENT, **agent},
            "user": USER,
            "function": function,
            "arguments": arguments,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def approve(service: ServiceProcess, approval_id: str) -> dict[str, Any]:
    response = service.client.post(
        f"/v1/tools/approvals/{approval_id}",
        headers=APPROVER,
        json={"decision": "approve", "by": "admin-7"},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


DIRECT_CALLS = [
    ("runCommand", "sandbox/runCommand", {"command": "echo hi > made.txt"}),
    ("writeFile", "sandbox/writeFile", {"path": "w.txt", "content": "text"}),
    ("readFile", "sandbox/readFile", {"path": "w.txt"}),
    ("listFiles", "sandbox/listFiles", {"path": "."}),
    ("publishFiles", "sandbox/publishFiles", {"paths": ["w.txt"]}),
    ("JsExecutorAgent", "js", {"code": "1 + 1"}),
]


@pytest.mark.parametrize(
    ("function", "route", "body"), DIRECT_CALLS, ids=[c[0] for c in DIRECT_CALLS]
)
def test_every_direct_call_is_in_the_executions_log(
    plain: ServiceProcess, function: str, route: str, body: dict[str, Any]
) -> None:
    conversation = new_conversation()
    setup_body = {"path": "w.txt", "content": "x"}
    setup = direct(plain, conversation, "sandbox/writeFile", setup_body)
    assert setup.status_code == 200, setup.text
    response = direct(plain, conversation, route, body)
    assert response.status_code == 200, response.text
    entries = [e for e in log_of(plain, conversation) if e["function"] == function]
    if function == "writeFile":  # the setup's entry is there too
        entries = [e for e in entries if e["arguments"] != setup_body]
    assert len(entries) == 1, entries
    entry = entries[0]
    assert entry["status"] == "succeeded"
    assert entry["source"] == ("system:js_executor" if route == "js" else "system:sandbox")
    assert (entry["agentId"], entry["userId"]) == ("agent-direct", "user-1")
    assert entry["requestedBy"] == "api-token"
    assert entry["arguments"] == body
    assert entry["durationMs"] is not None


def test_a_failed_direct_call_is_logged_with_its_error(plain: ServiceProcess) -> None:
    conversation = new_conversation()
    response = direct(plain, conversation, "sandbox/readFile", {"path": "missing.txt"})
    assert response.status_code == 404
    [entry] = log_of(plain, conversation)
    assert entry["status"] == "failed"
    assert entry["error"]["code"] == "file_not_found"


def test_the_log_keeps_long_texts_short(plain: ServiceProcess) -> None:
    conversation = new_conversation()
    content = "y" * 100_000
    written = direct(
        plain, conversation, "sandbox/writeFile", {"path": "big.txt", "content": content}
    )
    assert written.status_code == 200
    read = direct(plain, conversation, "sandbox/readFile", {"path": "big.txt"})
    assert read.json()["content"] == content  # the caller gets everything
    by_function = {e["function"]: e for e in log_of(plain, conversation)}
    logged_argument = by_function["writeFile"]["arguments"]["content"]
    assert len(logged_argument) < 5000 and "100000 characters" in logged_argument
    assert "100000 characters" in by_function["readFile"]["result"]["content"]


def test_a_deployment_policy_holds_a_direct_call_until_approved(strict: ServiceProcess) -> None:
    conversation = new_conversation()
    held = direct(strict, conversation, "sandbox/runCommand", {"command": "echo ran > ran.txt"})
    assert held.status_code == 202, held.text
    error = held.json()["error"]
    assert error["code"] == "approval_required"
    assert "the deployment's policy" in error["message"]
    [entry] = [e for e in log_of(strict, conversation) if e["function"] == "runCommand"]
    assert entry["status"] == "pending_approval" and entry["id"] == error["approvalId"]
    read = direct(strict, conversation, "sandbox/readFile", {"path": "ran.txt"})
    assert read.status_code == 404  # nothing ran

    decided = approve(strict, error["approvalId"])
    assert decided["ok"] is True and decided["result"]["exitCode"] == 0
    read = direct(strict, conversation, "sandbox/readFile", {"path": "ran.txt"})
    assert read.json()["content"] == "ran\n"


def test_an_agent_cannot_go_below_the_deployment_policy(strict: ServiceProcess) -> None:
    conversation = new_conversation()
    relaxed = {"functionPolicies": {"runCommand": "enabled"}}
    outcome = execute(strict, conversation, "runCommand", {"command": "true"}, **relaxed)
    assert outcome["error"]["code"] == "approval_required"
    catalog = strict.client.post(
        "/v1/tools/catalog",
        headers=AGENT_HEADERS,
        json={"agent": {**AGENT, **relaxed}, "user": USER, "org": AGENT_HEADERS["X-Siesta-Org"]},
    ).json()
    entry = next(f for f in catalog["functions"] if f["name"] == "runCommand")
    assert entry["policy"] == "confirm"
    assert "deployment" in entry["policyReason"] and "enabled" in entry["policyReason"]


def test_publishing_asks_first_by_default_on_every_route(strict: ServiceProcess) -> None:
    conversation = new_conversation()
    direct(strict, conversation, "sandbox/writeFile", {"path": "r.txt", "content": "report"})
    held = direct(strict, conversation, "sandbox/publishFiles", {"paths": ["r.txt"]})
    assert held.status_code == 202
    assert "default" in held.json()["error"]["message"]
    artifacts = strict.client.get(
        f"/v1/conversations/{conversation}/files", headers=AGENT_HEADERS
    ).json()["files"]
    assert artifacts == []
    published = approve(strict, held.json()["error"]["approvalId"])
    assert published["result"]["published"] == 1

    outcome = execute(strict, conversation, "publishFiles", {"paths": ["r.txt"]})
    assert outcome["error"]["code"] == "approval_required"
    allowed = {"functionPolicies": {"publishFiles": "enabled"}}
    outcome = execute(strict, conversation, "publishFiles", {"paths": ["r.txt"]}, **allowed)
    assert outcome["ok"] is True  # the agent's configuration relaxes the default


def test_a_function_the_deployment_disabled_is_refused_on_the_direct_route(
    strict: ServiceProcess,
) -> None:
    conversation = new_conversation()
    response = direct(strict, conversation, "sandbox/listFiles", {"path": "."})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "function_not_available"
    assert log_of(strict, conversation) == []


def events_of(response: httpx.Response) -> list[tuple[str, Any, float]]:
    """(kind, data, monotonic arrival time) of each server-sent event."""
    events, kind = [], ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((kind, json.loads(line.removeprefix("data: ")), time.monotonic()))
    return events


def test_execute_streams_statuses_while_the_script_runs(plain: ServiceProcess) -> None:
    script = (
        'logStatus("reading"); var until = Date.now() + 1500; '
        'while (Date.now() < until) {} logStatus("done"); 42'
    )
    body = {
        "conversationId": new_conversation(),
        "agent": AGENT,
        "user": USER,
        "function": "JsExecutorAgent",
        "arguments": {"code": script},
    }
    stream_headers = {**AGENT_HEADERS, "Accept": "text/event-stream"}
    with httpx.stream(
        "POST", f"{plain.base_url}/v1/tools/execute", json=body, headers=stream_headers, timeout=60
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = events_of(response)
    kinds = [kind for kind, _, _ in events]
    assert kinds == ["status", "status", "result"]
    assert [data["message"] for kind, data, _ in events if kind == "status"] == ["reading", "done"]
    first_status_at, result_at = events[0][2], events[-1][2]
    assert result_at - first_status_at > 1.0  # the first status came while it ran
    outcome = events[-1][1]
    assert outcome["ok"] is True and outcome["result"]["result"] == "42"
    assert outcome["result"]["statuses"] == ["reading", "done"]


def test_the_direct_read_route_pages_with_offset(plain: ServiceProcess) -> None:
    conversation = new_conversation()
    direct(plain, conversation, "sandbox/writeFile", {"path": "p.txt", "content": "abcdefghij"})
    first = direct(plain, conversation, "sandbox/readFile", {"path": "p.txt", "maxBytes": 4})
    assert first.json()["content"] == "abcd" and first.json()["nextOffset"] == 4
    second = direct(
        plain, conversation, "sandbox/readFile", {"path": "p.txt", "maxBytes": 4, "offset": 4}
    )
    assert second.json()["content"] == "efgh" and second.json()["nextOffset"] == 8
