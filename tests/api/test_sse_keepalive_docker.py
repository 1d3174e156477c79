"""Streamed answers stay alive while a call is silent: an SSE comment every
``SIESTA_HTTP__SSE_KEEPALIVE_SECONDS`` (a proxy with an idle timeout would cut the
stream, and the disconnect would kill the command), and clients see only events."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from typing import Any

import httpx
import httpx2
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    event_stream,
    headers,
    new_conversation,
    run_command,
)

pytestmark = pytest.mark.docker

KEEPALIVE = 0.3
SILENT = "echo start; sleep 2; echo end"
"""Prints, is silent for 2 s, prints again."""
SILENT_SCRIPT = "var until = Date.now() + 2000; while (Date.now() < until) {} 'done'"
COMMENT = ": keepalive"


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("docker", SIESTA_HTTP__SSE_KEEPALIVE_SECONDS=str(KEEPALIVE))


@pytest.fixture(scope="module")
def conversation(service: ServiceProcess) -> str:
    """A conversation whose sandbox exists (provisioning is not what is timed)."""
    conversation = new_conversation()
    run_command(service.client, conversation, "true")
    return conversation


def timed_lines(response: httpx.Response) -> list[tuple[float, str]]:
    return [(time.monotonic(), line) for line in response.iter_lines() if line]


def silent_stretch(lines: list[tuple[float, str]], after: str, before: str) -> list[str]:
    """The lines between the first line containing ``after`` and the first after it
    containing ``before``, checked to come no more than a second apart."""
    start = next(i for i, (_, line) in enumerate(lines) if after in line)
    end = next(i for i, (_, line) in enumerate(lines) if i > start and before in line)
    stretch = lines[start : end + 1]
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(stretch)]
    assert max(gaps) < 1.0, gaps  # silent for 2 s, yet never more than ~0.3 s quiet
    return [line for _, line in stretch[1:-1]]


def last_event(lines: list[tuple[float, str]]) -> tuple[str, Any]:
    kind = lines[-2][1].removeprefix("event: ")
    return kind, json.loads(lines[-1][1].removeprefix("data: "))


def test_a_silent_command_streams_comments_while_silent_then_its_result(
    service: ServiceProcess, conversation: str
) -> None:
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    with event_stream(service, path, {"command": SILENT}) as response:
        lines = timed_lines(response)
    between = silent_stretch(lines, '"start\\n"', '"end\\n"')
    assert between.count(COMMENT) >= 3
    assert set(between) == {COMMENT, "event: output"}  # the end's event line closes it
    kind, result = last_event(lines)
    assert kind == "result"
    assert (result["exitCode"], result["stdout"]) == (0, "start\nend\n")


def test_an_sse_client_sees_the_events_and_no_comments(
    service: ServiceProcess, conversation: str
) -> None:
    with httpx2.stream(
        "POST",
        f"{service.base_url}/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": SILENT},
        headers={**headers(), "Accept": "text/event-stream"},
        timeout=60,
    ) as response:
        events: list[tuple[str, Any]] = [
            (sse.event, sse.json()) for sse in httpx2.EventSource(response)
        ]
    assert [kind for kind, _ in events] == ["output", "output", "result"]
    assert [data["text"] for _, data in events[:2]] == ["start\n", "end\n"]
    assert events[-1][1]["stdout"] == "start\nend\n"


def test_a_streamed_call_with_comments_is_kept_for_its_idempotency_key(
    service: ServiceProcess, conversation: str
) -> None:
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    body = {"command": "sleep 1.5; echo $RANDOM$RANDOM"}
    sent = {**headers(), "Idempotency-Key": uuid.uuid4().hex, "Accept": "text/event-stream"}
    with service.client.stream("POST", path, json=body, headers=sent) as stream:
        text = stream.read().decode()
    assert f"{COMMENT}\n\n" in text
    streamed = json.loads(text.rstrip("\n").rsplit("\ndata: ", 1)[1])
    replay = service.client.post(path, json=body, headers=sent)
    assert replay.status_code == 200
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == streamed


def test_a_silent_script_streams_comments_on_the_js_and_execute_routes(
    service: ServiceProcess, conversation: str
) -> None:
    direct = (f"/v1/conversations/{conversation}/js", {"code": SILENT_SCRIPT})
    execute = (
        "/v1/tools/execute",
        {
            "conversationId": conversation,
            "agent": {"id": "agent-1", "systemToolIds": ["js_executor"]},
            "user": {"id": "user-1", "role": "User"},
            "function": "JsExecutorAgent",
            "arguments": {"code": f"logStatus('go'); {SILENT_SCRIPT}"},
        },
    )
    for path, body in (direct, execute):
        with event_stream(service, path, body) as response:
            lines = timed_lines(response)
        first, last = lines[0][1], lines[-1][1]
        assert first == COMMENT or first == "event: status", path
        kind, result = last_event(lines)
        assert kind == "result", (path, last)
        assert sum(line == COMMENT for _, line in lines) >= 3, path
        script = result["result"] if path == execute[0] else result  # execute wraps it
        assert script["result"] == "done", path
