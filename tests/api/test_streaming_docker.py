"""Output streamed while a command runs, and commands whose caller went away.

No timing windows: the command waits for a file the test creates (with docker
exec, outside the service) only after it has read the first output event, and
a cancelled command is proven dead by the next call getting the conversation
at once (otherwise it would wait for the lease until the command's timeout).
"""

from __future__ import annotations

import json
import socket
from typing import Any

import docker
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    event_stream,
    headers,
    new_conversation,
    run_command,
    sandbox_of,
    wait_until,
)

pytestmark = pytest.mark.docker

GATED = "echo one; while [ ! -f /tmp/go ]; do sleep 0.05; done; echo two; echo err >&2"


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    # A busy conversation is waited for 1 s at most: a cancelled command that
    # still held it would make the next call fail with session_busy.
    return start_service("docker", SIESTA_LEASE__WAIT_SECONDS="1")


def processes(container: Any) -> str:
    output = container.exec_run(["ps", "-eo", "args"]).output
    assert isinstance(output, bytes)
    return output.decode()


def test_output_streams_before_the_command_ends(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "true")  # the sandbox exists
    container = docker_client.containers.get(sandbox_of(service, conversation))
    events: list[tuple[str, Any]] = []
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    with event_stream(service, path, {"command": GATED}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
                if len(events) == 1:  # "one" arrived while the command waits for us
                    container.exec_run(["touch", "/tmp/go"])
    outputs = [data for kind, data in events if kind == "output"]
    assert outputs[0] == {"stream": "stdout", "text": "one\n"}
    assert "".join(o["text"] for o in outputs if o["stream"] == "stdout") == "one\ntwo\n"
    assert events[-1][0] == "result"
    result = events[-1][1]
    assert (result["exitCode"], result["stdout"], result["stderr"]) == (0, "one\ntwo\n", "err\n")


def test_a_client_that_disconnects_cancels_its_command(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    container = docker_client.containers.get(sandbox_of(service, conversation))

    def running() -> bool:
        return "sleep 3000" in processes(container)

    body = json.dumps({"command": "sleep 3000", "timeoutSeconds": 600}).encode()
    host, port = service.base_url.removeprefix("http://").split(":")
    lines = [
        f"POST /v1/conversations/{conversation}/sandbox/runCommand HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers().items()),
    ]
    with socket.create_connection((host, int(port))) as caller:
        caller.sendall("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
        assert wait_until(running, timeout=30)
    # The caller went away mid-command (its connection is closed).
    assert wait_until(lambda: not running(), timeout=30)
    # The conversation is free at once (the wait limit is 1 s, the command had 600 s).
    assert run_command(service.client, conversation, "echo free")["stdout"] == "free\n"


def test_a_streaming_client_that_disconnects_cancels_its_command(
    service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    body = {"command": "echo started; sleep 3001", "timeoutSeconds": 600}
    with event_stream(service, path, body) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                break  # got "started": leave with the command still running
    container = docker_client.containers.get(sandbox_of(service, conversation))
    assert wait_until(
        lambda: "sleep 3001" not in processes(container),
        timeout=30,
    )
    assert run_command(service.client, conversation, "echo free")["stdout"] == "free\n"
