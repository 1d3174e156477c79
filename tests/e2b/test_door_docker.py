"""One door, on Docker: an operator's ``runCommand: confirm`` and ``writeFile: confirm``
hold a process start, a terminal, a filesystem write and E2B's envd commands and
uploads exactly as they hold ``runCommand`` — each waits for a person, is in the
executions log with its caller, and once approved the same call runs, once."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest
import websocket
from e2b import Sandbox

from tests.e2b.conftest import E2bService
from tests.helpers import ServiceProcess, StartService, tokens_setting

ORG = "org-door"
TENANT = "door-tenant-" + uuid.uuid4().hex
"""The agent backend's token, bound to ``ORG`` (sandbox, shell, tools)."""
APPROVER = "door-approver-" + uuid.uuid4().hex
POLICIES = {"runCommand": "confirm", "writeFile": "confirm", "publishFiles": "enabled"}


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: Any) -> ServiceProcess:
    tokens = tokens_setting(
        ("tenant", TENANT, ["sandbox", "shell", "tools"], ORG),
        ("approver", APPROVER, ["approve"], ORG),
    )
    return start_service(
        "docker",
        SIESTA_TOKENS=tokens,
        SIESTA_TOOLS__FUNCTION_POLICIES=json.dumps(POLICIES),
    )


def as_tenant() -> dict[str, str]:
    return {
        "Authorization": f"Bearer {TENANT}",
        "X-Siesta-User": "user-1",
        "X-Siesta-Base-Image": "debian-base",
    }


def approve(service: ServiceProcess, approval_id: str) -> dict[str, Any]:
    decided = service.client.post(
        f"/v1/tools/approvals/{approval_id}",
        headers={"Authorization": f"Bearer {APPROVER}"},
        json={"decision": "approve", "by": "a person"},
    )
    assert decided.status_code == 200, decided.text
    answer: dict[str, Any] = decided.json()
    return answer


def logged(service: ServiceProcess, conversation: str) -> list[dict[str, Any]]:
    found = service.client.get(
        "/v1/tools/executions",
        headers=as_tenant(),
        params={"conversationId": conversation, "limit": 1000},
    )
    assert found.status_code == 200, found.text
    executions: list[dict[str, Any]] = found.json()["executions"]
    return executions


def held(response: httpx.Response, function: str) -> str:
    assert response.status_code == 202, response.text
    error = response.json()["error"]
    assert error["code"] == "approval_required"
    assert function in error["message"]
    approval: str = error["approvalId"]
    return approval


def test_a_process_start_waits_for_approval_then_runs_once(service: ServiceProcess) -> None:
    conversation = f"door-{uuid.uuid4().hex[:8]}"
    url = f"/v1/conversations/{conversation}/sandbox"
    start = {"command": "echo ran >> runs.txt"}
    approval = held(
        service.client.post(f"{url}/processes", headers=as_tenant(), json=start), "startProcess"
    )
    entry = next(e for e in logged(service, conversation) if e["id"] == approval)
    assert (entry["function"], entry["status"], entry["requestedBy"]) == (
        "startProcess",
        "pending_approval",
        "tenant",
    )
    granted = approve(service, approval)
    assert (granted["status"], len(granted["result"]["granted"])) == ("succeeded", 64)
    ran = service.client.post(f"{url}/processes", headers=as_tenant(), json=start)
    assert ran.status_code == 201, ran.text
    service.client.get(f"{url}/processes/{ran.json()['pid']}", headers=as_tenant())
    again = service.client.post(f"{url}/processes", headers=as_tenant(), json=start)
    held(again, "startProcess")  # the grant was for one run
    other = service.client.post(
        f"{url}/processes", headers=as_tenant(), json={"command": "echo other"}
    )
    held(other, "startProcess")  # another command needs its own approval
    runs = [e for e in logged(service, conversation) if e["status"] == "succeeded"]
    assert [e["function"] for e in runs if e["id"] != approval] == ["startProcess"]


def test_a_terminal_is_held_before_the_upgrade(service: ServiceProcess) -> None:
    conversation = f"door-{uuid.uuid4().hex[:8]}"
    url = "ws" + service.base_url.removeprefix("http")
    url += f"/v1/conversations/{conversation}/sandbox/terminal"
    header = [f"{name}: {value}" for name, value in as_tenant().items()]
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(url, header=header, timeout=30)
    assert refused.value.status_code == 202
    body = json.loads(refused.value.resp_body or b"{}")
    assert body["error"]["code"] == "approval_required"
    approve(service, body["error"]["approvalId"])
    terminal = websocket.create_connection(url, header=header, timeout=30)
    try:
        assert json.loads(terminal.recv())["type"] == "started"
    finally:
        terminal.close()
    functions = {(e["function"], e["status"]) for e in logged(service, conversation)}
    assert ("openTerminal", "succeeded") in functions


def test_filesystem_writes_follow_write_file(service: ServiceProcess) -> None:
    conversation = f"door-{uuid.uuid4().hex[:8]}"
    url = f"/v1/conversations/{conversation}/sandbox/fs"
    listed = service.client.post(f"{url}/list", headers=as_tenant(), json={"path": "."})
    assert listed.status_code == 200, listed.text  # a read follows listFiles: enabled
    approval = held(
        service.client.post(f"{url}/mkdir", headers=as_tenant(), json={"path": "made"}),
        "makeDirectory",
    )
    approve(service, approval)
    made = service.client.post(f"{url}/mkdir", headers=as_tenant(), json={"path": "made"})
    assert made.status_code == 201, made.text
    functions = [(e["function"], e["status"]) for e in logged(service, conversation)]
    assert ("listDirectory", "succeeded") in functions
    assert functions.count(("makeDirectory", "succeeded")) == 2  # the grant, then the run


def test_e2b_commands_and_uploads_are_held_like_run_command(service: ServiceProcess) -> None:
    e2b = E2bService(service)
    sandbox = Sandbox.create("base", **e2b.options(TENANT))
    try:
        with pytest.raises(Exception, match="approval") as refused:
            sandbox.commands.run("echo from-e2b > e2b.txt")
        approval = approval_in(str(refused.value))
        entry = next(e for e in logged(service, sandbox.sandbox_id) if e["id"] == approval)
        assert (entry["function"], entry["requestedBy"]) == ("startProcess", "tenant")
        approve(service, approval)
        assert sandbox.commands.run("echo from-e2b > e2b.txt").exit_code == 0
        with pytest.raises(Exception, match="approval"):
            sandbox.files.write("up.txt", "uploaded")
        assert sandbox.files.read("e2b.txt") == "from-e2b\n"  # a read: downloadFile, enabled
    finally:
        sandbox.kill()


def approval_in(message: str) -> str:
    """The approval id an error message names (``approval <32 hex>``)."""
    found = re.search(r"approval ([0-9a-f]{32})", message)
    assert found is not None, message
    return found.group(1)
