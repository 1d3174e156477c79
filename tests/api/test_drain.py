"""The drain's state and its middleware: what is in flight (HTTP requests to the end
of their answer, WebSockets until closed), ``Connection: close`` while draining, and
when a drain is over. The process side (SIGTERM) is ``tests/cli/test_server.py``."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from api.drain import HANDOFF_POLL_SECONDS, Drain, DrainMiddleware
from runtime.settings import DRAIN_MARGIN_SECONDS, Settings
from tests.manual_clock import ManualClock


def app_with(drain: Drain) -> Starlette:
    seen: list[int] = []

    async def counted(_: Request) -> Response:
        seen.append(drain.in_flight)
        return PlainTextResponse("ok", headers={"Connection": "keep-alive"})

    async def terminal(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_json({"inFlight": drain.in_flight})
        await websocket.receive_text()
        await websocket.close()

    app = Starlette(routes=[Route("/", counted), WebSocketRoute("/ws", terminal)])
    app.state.seen = seen
    return app


def test_requests_count_while_they_run_and_close_their_connection_while_draining() -> None:
    drain = Drain(30)
    app = app_with(drain)
    client = TestClient(DrainMiddleware(app, drain))
    assert client.get("/").headers["connection"] == "keep-alive"
    with client.websocket_connect("/ws") as terminal:
        assert terminal.receive_json() == {"inFlight": 1}
        assert drain.in_flight == 1
        drain.begin()
        assert not drain.over()  # the terminal is open
        assert client.get("/").headers["connection"] == "close"  # served, once
        terminal.send_text("bye")
    assert app.state.seen == [1, 2]
    assert drain.in_flight == 0
    assert drain.over()


def test_a_drain_is_over_when_idle_or_at_its_deadline() -> None:
    clock = ManualClock()
    drain = Drain(10, clock=clock.now)
    assert not drain.over() and not drain.draining
    drain.in_flight = 1
    drain.begin()
    assert drain.draining and not drain.over()
    clock.advance(9)
    drain.begin()  # again: the deadline stays
    assert not drain.over()
    clock.advance(1)
    assert drain.over()


def test_the_drain_time_defaults_to_the_longest_command_and_its_kill_grace() -> None:
    settings = Settings(command={"max_timeout_seconds": 100, "kill_grace_seconds": 3})
    assert settings.drain_seconds == 100 + 3 + DRAIN_MARGIN_SECONDS
    settings = Settings(http={"drain_seconds": 7})
    assert settings.drain_seconds == 7


def test_handing_off_returns_once_the_drain_begins() -> None:
    """What a resumable stream waits on (a process's output, a terminal)."""
    drain = Drain(30)

    async def wait() -> None:
        waiting = asyncio.ensure_future(drain.handing_off())
        await asyncio.sleep(HANDOFF_POLL_SECONDS * 2)
        assert not waiting.done()
        drain.begin()
        await asyncio.wait_for(waiting, HANDOFF_POLL_SECONDS * 4)

    asyncio.run(wait())
