"""The MCP server with the SDK's own client, over streamable HTTP (``/mcp`` of a real
``siesta-runtime serve``) and over stdio (``siesta-runtime mcp`` as a subprocess on
the same data directory, so that the executions log and the files are the service's)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from openpyxl import load_workbook

from runtime.core.settings import LEGACY_TOKEN_NAME
from runtime.functions.base import tool_schema
from runtime.functions.js import JS_EXECUTOR
from runtime.functions.processes import PROCESSES
from runtime.functions.sandbox import SANDBOX
from runtime.mcp.stdio import REQUESTED_BY
from tests.helpers import (
    APPROVER_TOKEN,
    PUBLISH_WITHOUT_APPROVAL,
    REPO,
    TEST_DISK_ROOT,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    TOKEN,
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    tokens_setting,
    upload,
)

ORG, USER, IMAGE = "org-a", "user-1", "debian-base"
HELD_POLICIES = '{"runCommand": "confirm", "publishFiles": "enabled"}'
APPROVER = {"Authorization": f"Bearer {APPROVER_TOKEN}", "X-Siesta-Org": ORG}


class Connect(Protocol):
    def __call__(
        self, service: ServiceProcess, conversation: str, *, agent: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[Client]: ...


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("fake", SIESTA_RECONCILE__BACKGROUND="false")


@pytest.fixture(scope="module")
def held_service(start_service: StartService) -> ServiceProcess:
    """A deployment whose policy asks a person before every ``runCommand``, with a
    token that may only decide (``approve``)."""
    return start_service(
        "fake",
        SIESTA_RECONCILE__BACKGROUND="false",
        SIESTA_TOOLS__FUNCTION_POLICIES=HELD_POLICIES,
        SIESTA_TOKENS=tokens_setting(("approver", APPROVER_TOKEN, ["approve"])),
    )


@contextlib.asynccontextmanager
async def over_http(
    service: ServiceProcess,
    conversation: str,
    mode: ConnectMode = "auto",
    agent: str | None = None,
) -> AsyncIterator[Client]:
    named = {"X-Siesta-Agent": agent} if agent else {}
    http = httpx2.AsyncClient(
        headers={**headers(ORG, USER, IMAGE), "X-Siesta-Conversation": conversation, **named},
        timeout=httpx2.Timeout(30, read=120),
    )
    async with (
        http,
        Client(streamable_http_client(f"{service.base_url}/mcp", http_client=http)) as c,
    ):
        yield c


@contextlib.asynccontextmanager
async def over_stdio(
    service: ServiceProcess,
    conversation: str,
    mode: ConnectMode = "auto",
    agent: str | None = None,
) -> AsyncIterator[Client]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "SIESTA_DATA_DIR": str(service.data_dir),
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({TEST_RUN_LABEL: TEST_RUN_ID}),
        "SIESTA_SANDBOX__DISK_DIR": str(TEST_DISK_ROOT),
        "SIESTA_POOL__ENABLED": "false",
        **PUBLISH_WITHOUT_APPROVAL,  # as start_service sets it
        **service.env,
    }
    arguments = ["--org", ORG, "--user", USER, "--conversation", conversation]
    arguments += ["--agent", agent] if agent else []
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cli.main", "mcp", *arguments, "--base-image", IMAGE],
        env={**env, "SIESTA_MCP_FILES_URL": service.base_url},
        cwd=REPO,
    )
    async with Client(parameters, mode=mode) as c:
        yield c


@pytest.fixture(params=["http", "stdio", "http-legacy", "stdio-legacy"])
def connect(request: pytest.FixtureRequest) -> Connect:
    """Each transport, in the 2026 protocol (per-request envelopes: the SDK's default)
    and in the handshake era (``initialize`` first: what most hosts speak today)."""
    transport, _, legacy = request.param.partition("-")
    opened = over_http if transport == "http" else over_stdio
    mode: ConnectMode = "legacy" if legacy else "auto"
    return lambda service, conversation, agent=None: opened(service, conversation, mode, agent)


def run(work: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(work)


def call(
    connect: Connect,
    service: ServiceProcess,
    conversation: str,
    *calls: tuple[str, dict[str, Any]],
    agent: str | None = None,
) -> list[types.CallToolResult]:
    """The tool calls, in order, in one MCP session of the conversation (of ``agent``)."""

    async def work() -> list[types.CallToolResult]:
        async with connect(service, conversation, agent=agent) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    results: list[types.CallToolResult] = run(work)
    return results


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def test_the_tools_are_the_catalogs_functions_and_the_process_tools(
    connect: Connect, service: ServiceProcess
) -> None:
    async def work() -> list[types.Tool]:
        async with connect(service, new_conversation()) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(work)}

    assert {name: tool.input_schema for name, tool in tools.items()} == {
        spec.name: spec.parameters() for spec in [*SANDBOX, *PROCESSES, JS_EXECUTOR]
    }
    assert {name: tool.output_schema for name, tool in tools.items()} == {
        spec.name: tool_schema(spec.result)
        for spec in [*SANDBOX, *PROCESSES, JS_EXECUTOR]
        if spec.result
    }
    assert tools["runCommand"].description == SANDBOX[0].description


def test_run_a_command(connect: Connect, service: ServiceProcess) -> None:
    [result] = call(
        connect,
        service,
        new_conversation(),
        ("runCommand", {"command": "echo hi; echo oops >&2; exit 3"}),
    )

    assert not result.is_error
    assert result.structured_content["exitCode"] == 3
    assert result.structured_content["stdout"] == "hi\n"
    assert text_of(result).startswith("exit code 3\n")
    assert "--- stderr ---\noops" in text_of(result)


def test_write_read_list_and_publish(connect: Connect, service: ServiceProcess) -> None:
    conversation = new_conversation()
    written, read, listed, published = call(
        connect,
        service,
        conversation,
        ("writeFile", {"path": "out/notes.md", "content": "# héllo\n"}),
        ("readFile", {"path": "out/notes.md"}),
        ("listFiles", {"path": "out"}),
        ("publishFiles", {"paths": ["out/notes.md", "out/missing.md"]}),
    )
    [link] = [block for block in published.content if isinstance(block, types.ResourceLink)]
    download = service.client.get(link.uri, headers=headers())

    assert written.structured_content["size"] == len("# héllo\n".encode())
    assert read.structured_content["content"] == "# héllo\n"
    assert text_of(read) == "/mnt/work/out/notes.md (9 bytes)\n# héllo\n"
    assert [e["name"] for e in listed.structured_content["entries"]] == ["notes.md"]
    assert published.structured_content["published"] == 1
    assert published.structured_content["partial"] is True
    assert "out/missing.md: publish_target_missing" in text_of(published)
    assert link.name == "notes.md" and link.uri.startswith(service.base_url)
    assert download.status_code == 200 and download.content == "# héllo\n".encode()


def test_conversation_files_are_resources(connect: Connect, service: ServiceProcess) -> None:
    conversation = new_conversation()
    upload(service.client, conversation, "data.bin", b"\x00\x01", org=ORG)

    async def work() -> tuple[types.CallToolResult, list[types.Resource], list[Any]]:
        async with connect(service, conversation) as client:
            await client.call_tool("writeFile", {"path": "a.txt", "content": "hi"})
            published = await client.call_tool("publishFiles", {"paths": ["a.txt"]})
            listed = (await client.list_resources()).resources
            contents = [(await client.read_resource(r.uri)).contents[0] for r in listed]
            return published, listed, contents

    published, listed, contents = run(work)
    [link] = [block for block in published.content if isinstance(block, types.ResourceLink)]

    assert sorted(r.name for r in listed) == ["a.txt", "data.bin"]
    assert link.uri in {r.uri for r in listed}
    by_name = {r.name: c for r, c in zip(listed, contents, strict=True)}
    assert isinstance(by_name["a.txt"], types.TextResourceContents)
    assert by_name["a.txt"].text == "hi"
    assert isinstance(by_name["data.bin"], types.BlobResourceContents)
    assert by_name["data.bin"].blob == "AAE="


def test_a_script_with_excel_helpers(connect: Connect, service: ServiceProcess) -> None:
    conversation = new_conversation()
    code = """
    createExcelDocument('fruit.xlsx', 'Fruit', [{name: 'apple', qty: 3}, {name: 'kiwi', qty: 4}]);
    var rows = readExcelFile('fruit.xlsx', 'Fruit');
    rows.map(function (r) { return r.name + '=' + r.qty }).join(',')
    """
    [result] = call(connect, service, conversation, ("JsExecutorAgent", {"code": code}))
    assert not result.is_error, text_of(result)  # first: a failed call says why
    files = service.client.get(f"/v1/conversations/{conversation}/files", headers=headers())
    assert len(files.json()["files"]) == 1, (files.json(), result.structured_content)
    [artifact] = files.json()["files"]
    content = service.client.get(
        f"/v1/conversations/{conversation}/files/{artifact['id']}/content", headers=headers()
    ).content

    assert result.structured_content["result"] == "apple=3,kiwi=4"
    assert "result: apple=3,kiwi=4" in text_of(result)
    assert artifact["name"] == "fruit.xlsx" and artifact["kind"] == "artifact"
    assert load_workbook(io.BytesIO(content))["Fruit"]["A2"].value == "apple"


def test_a_failed_script_is_a_tool_error_with_its_logs(
    connect: Connect, service: ServiceProcess
) -> None:
    [result] = call(
        connect,
        service,
        new_conversation(),
        ("JsExecutorAgent", {"code": "log('before'); throw new Error('boom')"}),
    )

    assert result.is_error
    assert result.structured_content["error"]["code"] == "js_error"
    assert result.structured_content["logs"] == ["before"]
    assert text_of(result).startswith("js_error: ")


def test_statuses_and_output_are_progress_notifications(
    connect: Connect, service: ServiceProcess
) -> None:
    received: dict[str, list[tuple[float, str | None]]] = {"js": [], "command": []}

    def recorder(call: str) -> ProgressFnT:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            received[call].append((progress, message))

        return on_progress

    async def work() -> None:
        async with connect(service, new_conversation()) as client:
            code = "logStatus('reading'); logStatus('writing'); 1 + 1"
            await client.call_tool(
                "JsExecutorAgent", {"code": code}, progress_callback=recorder("js")
            )
            await client.call_tool(
                "runCommand", {"command": "echo streamed"}, progress_callback=recorder("command")
            )

    run(work)

    assert received["js"] == [(1, "reading"), (2, "writing")]
    assert "".join(message or "" for _, message in received["command"]) == "stdout: streamed\n"


def test_a_cancelled_call_stops_its_command(connect: Connect, service: ServiceProcess) -> None:
    async def work() -> types.CallToolResult:
        async with connect(service, new_conversation()) as client:
            with anyio.move_on_after(1):
                await client.call_tool("runCommand", {"command": "sleep 30 && touch late"})
            # The conversation is free at once (else this waits or is session_busy),
            # and the command died before it could touch anything.
            return await client.call_tool("listFiles", {})

    listing = run(work)

    assert not listing.is_error, text_of(listing)
    assert listing.structured_content["entries"] == []


def test_a_bad_argument_is_a_tool_error(connect: Connect, service: ServiceProcess) -> None:
    missing, unknown = call(
        connect,
        service,
        new_conversation(),
        ("runCommand", {}),
        ("readFile", {"path": "a.txt", "colour": "red"}),
    )

    for result in (missing, unknown):
        assert result.is_error
        assert result.structured_content["error"]["code"] == "invalid_arguments"
    assert "command" in missing.structured_content["error"]["message"]
    assert "colour" in text_of(unknown)


def test_a_policy_that_asks_first_holds_the_call(
    connect: Connect, held_service: ServiceProcess
) -> None:
    conversation = new_conversation()
    [result] = call(connect, held_service, conversation, ("runCommand", {"command": "echo x"}))
    error = result.structured_content["error"]
    held = log_of(held_service, conversation)
    decided = held_service.client.post(
        f"/v1/tools/approvals/{error['approvalId']}",
        headers=APPROVER,
        json={"decision": "approve", "by": "ann"},
    )

    assert result.is_error
    assert error["code"] == "approval_required"
    assert f"approvalId: {error['approvalId']}" in text_of(result)
    assert [(e["id"], e["function"], e["status"]) for e in held] == [
        (error["approvalId"], "runCommand", "pending_approval")
    ]
    assert held[0]["requestedBy"] in {LEGACY_TOKEN_NAME, REQUESTED_BY}
    assert decided.status_code == 200, decided.text
    assert decided.json()["result"]["stdout"] == "x\n"
    assert [e["status"] for e in log_of(held_service, conversation)] == ["succeeded"]


@pytest.mark.parametrize("connect", ["http", "stdio"], indirect=True)  # the era is moot
def test_a_registered_agents_policies_bind_its_calls(
    connect: Connect, service: ServiceProcess
) -> None:
    """The agent's configuration, registered once, holds over MCP as on the HTTP
    routes: ``runCommand: confirm`` asks first, a disabled function is refused, and
    neither it nor a System Tool the agent lacks is offered."""
    agent = {
        "id": "mcp-careful",
        "systemToolIds": ["sandbox"],
        "functionPolicies": {"runCommand": "confirm", "listFiles": "disabled"},
    }
    put = service.client.post("/v1/agents", headers=headers(ORG, USER, None), json=agent)
    assert put.status_code == 200, put.text
    conversation = new_conversation()

    held, off, script = call(
        connect,
        service,
        conversation,
        ("runCommand", {"command": "echo x"}),
        ("listFiles", {}),
        ("JsExecutorAgent", {"code": "1"}),
        agent="mcp-careful",
    )
    [anonymous] = call(connect, service, conversation, ("runCommand", {"command": "echo x"}))

    async def listed() -> list[str]:
        async with connect(service, conversation, agent="mcp-careful") as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    offered = run(listed)

    assert held.is_error and held.structured_content["error"]["code"] == "approval_required"
    assert off.is_error and off.structured_content["error"]["code"] == "function_not_available"
    assert script.is_error
    assert "not among its systemToolIds" in script.structured_content["error"]["message"]
    assert not anonymous.is_error and anonymous.structured_content["stdout"] == "x\n"
    assert offered == [s.name for s in [*SANDBOX, *PROCESSES] if s.name != "listFiles"]


def log_of(service: ServiceProcess, conversation: str) -> list[dict[str, Any]]:
    response = service.client.get(
        "/v1/tools/executions", headers=headers(), params={"conversationId": conversation}
    )
    assert response.status_code == 200, response.text
    executions: list[dict[str, Any]] = response.json()["executions"]
    return executions


def test_http_needs_the_token_its_scope_and_the_conversation(
    held_service: ServiceProcess,
) -> None:
    service = held_service
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    context = {**headers(), "X-Siesta-Conversation": new_conversation()}
    accept = {"Accept": "application/json, text/event-stream"}

    def post(headers: dict[str, str]) -> httpx.Response:
        return service.client.post("/mcp", json=initialize, headers={**headers, **accept})

    no_token = post({k: v for k, v in context.items() if k != "Authorization"})
    wrong_token = post({**context, "Authorization": "Bearer not-" + TOKEN})
    no_scope = post({**context, "Authorization": f"Bearer {APPROVER_TOKEN}"})
    no_conversation = post({k: v for k, v in context.items() if k != "X-Siesta-Conversation"})
    fine = post(context)

    for refused in (no_token, wrong_token):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"
    assert no_scope.status_code == 403
    assert no_scope.json()["error"] == {
        "code": "forbidden_scope",
        "message": "/mcp needs a token with the 'sandbox' scope; 'approver' lacks it",
        "scope": "sandbox",
        "token": "approver",
    }
    assert no_conversation.status_code == 400
    assert no_conversation.json()["error"]["code"] == "missing_context"
    assert fine.status_code == 200, fine.text


def test_a_held_call_is_cancelled_with_its_conversation(held_service: ServiceProcess) -> None:
    conversation = new_conversation()
    [held] = call(over_http, held_service, conversation, ("runCommand", {"command": "echo x"}))
    approval = held.structured_content["error"]["approvalId"]
    deleted = held_service.client.delete(f"/v1/conversations/{conversation}", headers=headers())
    decided = held_service.client.post(
        f"/v1/tools/approvals/{approval}",
        headers=APPROVER,
        json={"decision": "approve", "by": "ann"},
    )
    sandbox = held_service.client.get(
        f"/v1/conversations/{conversation}/sandbox", headers=headers()
    )

    assert deleted.status_code == 200 and deleted.json()["deleted"] is True, deleted.text
    assert decided.status_code == 410, decided.text
    assert decided.json()["error"]["code"] == "approval_cancelled"
    assert log_of(held_service, conversation) == []
    assert sandbox.status_code == 404, sandbox.text
