"""``Conversation.follow_process``: the offsets it asks for across cuts, what it yields,
and when it gives up; against a scripted transport (the service side of resuming is
``tests/fleet/test_readers_docker.py`` and ``tests/faults/test_process_readers_docker.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from siesta_client import (
    ConnectionFailed,
    NotFound,
    OutputGap,
    ProcessEnded,
    ProcessOutput,
    Retries,
    SiestaClient,
)

ENDED: dict[str, object] = {
    "pid": 7,
    "tag": None,
    "command": "count",
    "cwd": None,
    "running": False,
    "exitCode": 0,
    "status": "exit status 0",
    "recent": {},
}


def output(text: str, offset: int) -> str:
    return (
        f"id: {offset}\nevent: output\ndata: {json.dumps({'stream': 'stdout', 'text': text})}\n\n"
    )


def sse(*events: str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, text="".join(events))


def follower(
    answers: list[Callable[[], httpx.Response]], asked: list[str], tries: int = 3
) -> SiestaClient:
    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.params["from"])
        assert request.headers["accept"] == "text/event-stream"
        return answers.pop(0)()

    return SiestaClient(
        "http://siesta.test",
        "t",
        retries=Retries(tries, backoff_seconds=0.001),
        transport=httpx.MockTransport(answer),
    )


def test_it_reads_on_from_its_offset_after_a_cut_and_an_error_saying_to_connect_again() -> None:
    def cut() -> httpx.Response:
        msg = "peer closed"
        raise httpx.RemoteProtocolError(msg)

    answers = [
        lambda: sse(output("one\n", 4), ": keepalive\n\n"),  # closes without its end
        cut,
        lambda: sse(
            'event: error\ndata: {"code": "sandbox_unavailable", "message": "connect again"}\n\n'
        ),
        lambda: sse('event: gap\ndata: {"lostBytes": 3}\n\n', output("four\n", 12)),
        lambda: sse(f"event: end\ndata: {json.dumps(ENDED)}\n\n"),
    ]
    asked: list[str] = []
    with follower(answers, asked, tries=4) as siesta:  # three failures in a row, then on
        conversation = siesta.conversation("c", org="o", user="u")
        events = list(conversation.follow_process(7, start=0))
    assert asked == ["0", "4", "4", "4", "12"]
    assert events[:3] == [
        ProcessOutput("stdout", "one\n", 4),
        OutputGap(3),
        ProcessOutput("stdout", "four\n", 12),
    ]
    assert isinstance(events[3], ProcessEnded) and events[3].process.exitCode == 0


def test_it_gives_up_after_its_tries_in_a_row_and_raises_errors_it_cannot_resume() -> None:
    asked: list[str] = []
    unavailable = [lambda: httpx.Response(503, json={"error": {"code": "x", "message": "m"}})] * 3
    with (
        follower(unavailable, asked) as siesta,
        pytest.raises(ConnectionFailed, match="3 tries in a row"),
    ):
        list(siesta.conversation("c", org="o", user="u").follow_process(7, start=5))
    assert asked == ["5", "5", "5"]

    missing = [
        lambda: httpx.Response(404, json={"error": {"code": "process_not_found", "message": "no"}})
    ]
    with follower(missing, asked) as siesta, pytest.raises(NotFound):
        list(siesta.conversation("c", org="o", user="u").follow_process(7))
