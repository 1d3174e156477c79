"""A conversation's background processes through /v1, on Docker: they keep running
after the call, take input, stream their output, end by signal, and a runCommand
beside them leaves them alone."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from siesta_client import AsyncSiestaClient, SiestaClient
from tests.helpers import TOKEN, ServiceProcess, headers, new_conversation, run_command

pytestmark = [pytest.mark.docker]


def processes_url(conversation: str) -> str:
    return f"/v1/conversations/{conversation}/sandbox/processes"


def start(service: ServiceProcess, conversation: str, **body: Any) -> dict[str, Any]:
    response = service.client.post(processes_url(conversation), json=body, headers=headers())
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    return started


def state(service: ServiceProcess, conversation: str, pid: int) -> dict[str, Any]:
    response = service.client.get(f"{processes_url(conversation)}/{pid}", headers=headers())
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def until(predicate: Any, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_background_process_keeps_running_beside_commands_and_ends_by_signal(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    ticker = start(
        docker_service, conversation, command="while :; do echo tick; sleep 0.2; done", tag="ticker"
    )
    assert (ticker["running"], ticker["cwd"], ticker["tag"]) == (True, "/mnt/work", "ticker")
    until(
        lambda: (
            "tick" in state(docker_service, conversation, ticker["pid"])["recent"].get("stdout", "")
        )
    )

    # A command of the conversation (which kills what an earlier holder left running)
    # leaves the background process alone.
    assert run_command(docker_service.client, conversation, "echo beside")["stdout"] == "beside\n"
    assert state(docker_service, conversation, ticker["pid"])["running"] is True

    listed = docker_service.client.get(processes_url(conversation), headers=headers()).json()
    assert [p["pid"] for p in listed["processes"]] == [ticker["pid"]]
    signalled = docker_service.client.post(
        f"{processes_url(conversation)}/{ticker['pid']}/signal",
        json={"signal": "SIGTERM"},
        headers=headers(),
    )
    assert signalled.status_code == 204, signalled.text
    until(lambda: not state(docker_service, conversation, ticker["pid"])["running"])
    ended = state(docker_service, conversation, ticker["pid"])
    assert ended["status"] == "exit status 143" and ended["exitCode"] == 143

    missing = docker_service.client.get(f"{processes_url(conversation)}/999999", headers=headers())
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "process_not_found")


def test_a_process_takes_input_and_streams_its_output(docker_service: ServiceProcess) -> None:
    conversation = new_conversation()
    reader = start(
        docker_service, conversation, command="while read line; do echo got $line; done", stdin=True
    )
    url = f"{processes_url(conversation)}/{reader['pid']}"
    with (
        httpx.Client(base_url=docker_service.base_url, timeout=30) as client,
        client.stream("GET", url, headers={**headers(), "Accept": "text/event-stream"}) as stream,
    ):
        for text in ("one", "two"):
            written = docker_service.client.post(
                f"{url}/input", json={"data": f"{text}\n"}, headers=headers()
            )
            assert written.status_code == 204, written.text
        docker_service.client.post(f"{url}/input", json={"eof": True}, headers=headers())
        events = [line for line in stream.iter_lines() if line.startswith("event:")]
    assert events[-1] == "event: end" and "event: output" in events
    ended = state(docker_service, conversation, reader["pid"])
    assert (ended["running"], ended["exitCode"]) == (False, 0)
    assert ended["recent"]["stdout"] == "got one\ngot two\n"
    closed = docker_service.client.post(f"{url}/input", json={"data": "x"}, headers=headers())
    assert closed.status_code == 404  # ended: no running process of that pid takes input


def test_the_python_clients_run_background_processes(docker_service: ServiceProcess) -> None:
    with SiestaClient(docker_service.base_url, TOKEN) as siesta:
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        server = conv.start_process("echo listening; exec sleep 300", tag="server")
        until(lambda: conv.process(server.pid).recent.get("stdout") == "listening\n")
        assert [p.tag for p in conv.processes().processes] == ["server"]
        conv.signal_process(server.pid, "SIGKILL")
        until(lambda: not conv.process(server.pid).running)
        assert conv.process(server.pid).status == "exit status 137"

    async def from_async_client() -> None:
        async with AsyncSiestaClient(docker_service.base_url, TOKEN) as client:
            conv = client.conversation(
                new_conversation(), org="org-a", user="user-1", base_image="debian-base"
            )
            upper = await conv.start_process("tr a-z A-Z", stdin=True)
            await conv.send_input(upper.pid, "shout\n", eof=True)
            for _ in range(150):
                if not (await conv.process(upper.pid)).running:
                    break
                await asyncio.sleep(0.1)
            assert (await conv.process(upper.pid)).recent == {"stdout": "SHOUT\n"}

    asyncio.run(from_async_client())
