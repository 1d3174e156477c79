"""The MCP process tools with the SDK's client over ``/mcp`` of a real service on
Docker: a background process started, read while it runs, given input, stopped, and
read again once it ended; each call in the executions log."""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from runtime.functions.processes import PROCESSES
from tests.api.test_mcp import over_http, text_of
from tests.helpers import ServiceProcess, headers, new_conversation

pytestmark = [pytest.mark.docker]


async def called(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    """A call that must succeed; its structured result."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result)
    structured: dict[str, Any] = result.structured_content or {}
    return structured


async def printed(client: Client, pid: int, stream: str, text: str) -> dict[str, Any]:
    """``readProcess`` until ``text`` is in what the process printed on ``stream``."""
    with anyio.fail_after(15):
        while True:
            state = await called(client, "readProcess", pid=pid)
            if text in state["recent"].get(stream, ""):
                return state
            await anyio.sleep(0.1)


def test_the_four_process_tools_are_listed(docker_service: ServiceProcess) -> None:
    async def work() -> list[types.Tool]:
        async with over_http(docker_service, new_conversation()) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(work)}

    for spec in PROCESSES:
        assert tools[spec.name].input_schema == spec.parameters()
        assert tools[spec.name].description == spec.description
    assert tools["readProcess"].annotations is not None
    assert tools["readProcess"].annotations.read_only_hint is True
    assert tools["startProcess"].input_schema["required"] == ["command"]


def test_a_process_runs_on_between_calls_until_stopped(docker_service: ServiceProcess) -> None:
    conversation = new_conversation()

    async def work() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], types.CallToolResult]:
        async with over_http(docker_service, conversation) as client:
            started = await called(
                client,
                "startProcess",
                command="echo hi; sleep 30",
                tag="sleeper",
                cwd=None,  # a model in strict mode sends null for what it leaves out
                env=None,
                user=None,
                stdin=None,
                timeoutSeconds=None,
            )
            running = await printed(client, started["pid"], "stdout", "hi")
            stopped = await called(client, "stopProcess", pid=started["pid"])
            read = await client.call_tool("readProcess", {"pid": started["pid"]})
            return started, running, stopped, read

    started, running, stopped, read = anyio.run(work)
    ended = read.structured_content or {}
    log = docker_service.client.get(
        "/v1/tools/executions", headers=headers(), params={"conversationId": conversation}
    ).json()["executions"]

    assert (started["running"], started["tag"], started["cwd"]) == (True, "sleeper", "/mnt/work")
    assert started["command"] == "echo hi; sleep 30"
    assert running["running"] is True and running["recent"]["stdout"] == "hi\n"
    assert stopped["running"] is False  # stopProcess waits a little for the end
    assert (ended["running"], ended["exitCode"], ended["status"]) == (
        False,
        143,
        "exit status 143",
    )
    assert ended["recent"]["stdout"] == "hi\n"
    assert text_of(read) == (
        f"process {started['pid']} (sleeper): ended, exit status 143\n--- stdout ---\nhi"
    )
    assert {e["function"] for e in log} == {"startProcess", "readProcess", "stopProcess"}
    assert {e["status"] for e in log} == {"succeeded"}


def test_a_process_reads_what_is_written_to_its_input(docker_service: ServiceProcess) -> None:
    async def work() -> tuple[dict[str, Any], dict[str, Any], float, types.CallToolResult]:
        async with over_http(docker_service, new_conversation()) as client:
            cat = await called(client, "startProcess", command="cat", stdin=True)
            await called(client, "writeProcessInput", pid=cat["pid"], data="hello\n")
            echoed = await printed(client, cat["pid"], "stdout", "hello")
            await called(client, "writeProcessInput", pid=cat["pid"], data="", eof=True)
            began = time.monotonic()
            ended = await called(client, "readProcess", pid=cat["pid"], waitSeconds=20)
            waited = time.monotonic() - began
            deaf = await called(client, "startProcess", command="sleep 30")
            refused = await client.call_tool("writeProcessInput", {"pid": deaf["pid"], "data": "x"})
            await called(client, "stopProcess", pid=deaf["pid"], signal="SIGKILL")
            return echoed, ended, waited, refused

    echoed, ended, waited, refused = anyio.run(work)

    assert echoed["running"] is True and echoed["recent"]["stdout"] == "hello\n"
    assert (ended["running"], ended["exitCode"], ended["recent"]["stdout"]) == (False, 0, "hello\n")
    assert waited < 10  # readProcess answers when the process ends, not at waitSeconds
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["error"]["code"] == "stdin_closed"


def test_an_unknown_pid_or_a_bad_argument_is_a_tool_error(docker_service: ServiceProcess) -> None:
    async def work() -> list[types.CallToolResult]:
        async with over_http(docker_service, new_conversation()) as client:
            return [
                await client.call_tool("readProcess", {"pid": 999999}),
                await client.call_tool("writeProcessInput", {"pid": 999999, "data": "x"}),
                await client.call_tool("stopProcess", {"pid": 999999}),
                await client.call_tool("readProcess", {"pid": 1, "waitSeconds": 31}),
                await client.call_tool("startProcess", {"command": "x", "timeoutSeconds": 2**40}),
            ]

    *missing, wait_too_long, timeout_too_long = anyio.run(work)

    for result in missing:
        assert result.is_error and result.structured_content is not None
        assert result.structured_content["error"]["code"] == "process_not_found"
        assert text_of(result).startswith("process_not_found: ")
    for too_long in (wait_too_long, timeout_too_long):
        assert too_long.is_error and too_long.structured_content is not None
        assert too_long.structured_content["error"]["code"] == "invalid_arguments"
