"""The Python client's ``Terminal`` against a scripted terminal server (Starlette under
uvicorn, the service's WebSocket protocol): the handoffs it must ride out, in order,
without hanging. The real service and sandboxes: ``test_terminal_docker.py`` and
``tests/fleet``."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from siesta_client import (
    ConnectionFailed,
    Conversation,
    InvalidRequest,
    Retries,
    SiestaClient,
    SiestaError,
    Terminal,
)
from siesta_client._websocket import WAIT_SECONDS
from tests.helpers import wait_until

PATH = "/v1/conversations/c1/sandbox/terminal"
PID = 41
QUIET_SECONDS = 4 * WAIT_SECONDS
BIG_MESSAGE_BYTES = 100 * 1024


@dataclass
class Script:
    """What each connection does, in the order they come (one entry per connection),
    and what the server saw."""

    plans: list[str] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    keys: list[bytes] = field(default_factory=list)
    lines: int = 3000


async def terminal(websocket: WebSocket) -> None:
    script: Script = websocket.app.state.script
    query = dict(websocket.query_params)
    plan = script.plans.pop(0) if script.plans else "serve"
    script.seen.append({"plan": plan, **query})
    if plan == "refuse":
        response = JSONResponse(
            {"error": {"code": "not_a_terminal", "message": "not one"}}, status_code=400
        )
        await websocket.send_denial_response(response)
        return
    if plan == "unavailable":  # every instance draining or down behind the balancer
        response = JSONResponse(
            {"error": {"code": "service_unavailable", "message": "later"}}, status_code=503
        )
        await websocket.send_denial_response(response)
        return
    await websocket.accept()
    if plan == "handoff-first":  # reached while it drains: handed off before started
        await websocket.send_json({"type": "reconnect", "pid": PID})
        await websocket.close(1012)
        return
    await websocket.send_json({"type": "started", "pid": PID})
    if plan == "flood":
        for i in range(script.lines):
            await websocket.send_bytes(f"{i}\n".encode())
        await websocket.send_json({"type": "exit", "exitCode": 0, "status": "exit status 0"})
        await websocket.close()
        return
    if plan == "big":  # one message past httpx-ws's default limit (64 KiB)
        await websocket.send_bytes(b"x" * BIG_MESSAGE_BYTES)
        await websocket.send_json({"type": "exit", "exitCode": 0, "status": "exit status 0"})
        await websocket.close()
        return
    if plan == "quiet":  # a shell that prints nothing for a while, then a line
        await asyncio.sleep(QUIET_SECONDS)
        await websocket.send_bytes(b"after a while\n")
        await websocket.send_json({"type": "exit", "exitCode": 0, "status": "exit status 0"})
        await websocket.close()
        return
    if plan == "handoff-after-one":
        message = await websocket.receive()
        script.keys.append(message.get("bytes") or b"")
        await websocket.send_json({"type": "reconnect", "pid": PID})
        await websocket.close(1012)
        return
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                script.keys.append(message["bytes"])
                await websocket.send_bytes(b"echo:" + message["bytes"])
                if message["bytes"] == b"exit\n":
                    await websocket.send_json({"type": "exit", "exitCode": 3, "status": "3"})
                    await websocket.close()
                    return
    except WebSocketDisconnect:
        return


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    app = Starlette(routes=[WebSocketRoute(PATH, terminal)])
    app.state.script = Script()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", ws="wsproto", lifespan="off", loop="asyncio")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert wait_until(lambda: running.started, timeout=30), "the scripted server did not start"
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", app.state.script
    running.should_exit = True
    thread.join(10)


Opener = Callable[[str], Conversation]


@pytest.fixture
def conversation() -> Iterator[Opener]:
    """A conversation's scope of a client to the server, each client closed after."""
    clients: list[SiestaClient] = []

    def make(url: str) -> Conversation:
        client = SiestaClient(url, "t", retries=Retries(attempts=4, backoff_seconds=0.01))
        clients.append(client)
        return client.conversation("c1", org="o", user="u")

    yield make
    for client in clients:
        client.close()


def test_output_comes_in_order_while_another_thread_writes(
    server: tuple[str, Script], conversation: Opener
) -> None:
    url, script = server
    script.plans = ["flood"]
    with conversation(url).open_terminal() as terminal:
        got = bytearray()
        writer = threading.Thread(target=lambda: write_often(terminal, 200))
        writer.start()
        while chunk := terminal.read(10):
            got.extend(chunk)
        writer.join(10)
        with pytest.raises(SiestaError) as ended:  # its end read: a write says so
            terminal.write("x")
    assert ended.value.code == "terminal_ended"
    assert got.decode().splitlines() == [str(i) for i in range(script.lines)]
    assert terminal.exit is not None and terminal.exit.exit_code == 0
    assert len(script.seen) == 1  # an ended terminal is never attached again


def write_often(terminal: Terminal, times: int) -> None:
    for _ in range(times):
        try:
            terminal.write("x")
        except SiestaError as error:  # ended meanwhile: said so, never attached again
            assert error.code == "terminal_ended"
            return


def test_a_quiet_terminal_is_waited_for_never_attached_again(
    server: tuple[str, Script], conversation: Opener
) -> None:
    """Silence is not a cut connection: a shell that prints nothing for a while (here
    four of the client's waits on the socket) is read on, on the same connection."""
    url, script = server
    script.plans = ["quiet"]
    with conversation(url).open_terminal() as terminal:
        assert terminal.read_until("after a while", timeout=30)
        assert terminal.read(10) == b""
    assert terminal.exit is not None and terminal.exit.exit_code == 0
    assert len(script.seen) == 1


def test_a_message_up_to_the_clients_limit_is_read_whole(
    server: tuple[str, Script], conversation: Opener
) -> None:
    url, script = server
    script.plans = ["big"]
    got = bytearray()
    with conversation(url).open_terminal() as terminal:
        while chunk := terminal.read(10):
            got.extend(chunk)
    assert len(got) == BIG_MESSAGE_BYTES
    assert terminal.exit is not None and terminal.exit.exit_code == 0
    assert len(script.seen) == 1


def test_a_handoff_as_the_first_message_is_attached_again(
    server: tuple[str, Script], conversation: Opener
) -> None:
    """A terminal opened on an instance that was draining: started, handed off at once;
    the client attaches to it by pid (not a second shell), at the size it asked for."""
    url, script = server
    script.plans = ["handoff-first", "handoff-first", "serve"]
    with conversation(url).open_terminal(cols=100, rows=30) as terminal:
        terminal.write("exit\n")
        assert terminal.read_until("echo:exit")
        assert terminal.read(10) == b""
    assert terminal.pid == PID and terminal.exit is not None and terminal.exit.exit_code == 3
    assert [s.get("pid") for s in script.seen] == [None, str(PID), str(PID)]
    assert all((s["cols"], s["rows"]) == ("100", "30") for s in script.seen)


def test_a_handoff_mid_way_loses_no_key_written_after_it(
    server: tuple[str, Script], conversation: Opener
) -> None:
    url, script = server
    script.plans = ["serve", "handoff-after-one", "serve"]
    with conversation(url).attach_terminal(PID) as terminal:
        terminal.write("one\n")
        terminal.read_until("echo:one")
        terminal.detach()
    with conversation(url).attach_terminal(PID, cols=120, rows=40) as terminal:
        terminal.write("two\n")  # taken, then the instance hands off
        deadline = time.monotonic() + 10
        while not terminal._current().cut.is_set():  # the handoff has arrived
            assert time.monotonic() < deadline
            time.sleep(0.01)
        terminal.write("three\n")  # to the next instance, never the one that left
        terminal.read_until("echo:three")
        terminal.close()
    assert script.keys == [b"one\n", b"two\n", b"three\n"]
    assert (script.seen[-1]["cols"], script.seen[-1]["rows"]) == ("120", "40")


def test_close_does_not_hang_on_output_nobody_read(
    server: tuple[str, Script], conversation: Opener
) -> None:
    url, script = server
    script.plans, script.lines = ["flood"], 20000  # far past what the client holds
    terminal = conversation(url).open_terminal()
    time.sleep(1)  # the queues fill, and the socket is no longer read
    began = time.monotonic()
    closing = threading.Thread(target=terminal.close)
    closing.start()
    closing.join(10)
    assert not closing.is_alive(), "close() hung"
    assert time.monotonic() - began < 5


def test_refusals_and_bad_sizes_are_errors(
    server: tuple[str, Script], conversation: Opener
) -> None:
    url, script = server
    script.plans = ["refuse"]
    with pytest.raises(InvalidRequest) as refused:
        conversation(url).attach_terminal(7)
    with pytest.raises(InvalidRequest) as too_wide:
        conversation(url).open_terminal(cols=1001)
    with pytest.raises(InvalidRequest) as no_columns:  # refused, not the default 80
        conversation(url).open_terminal(cols=0)
    with pytest.raises(InvalidRequest):
        conversation(url).attach_terminal(7, rows=True)
    script.plans = ["serve"]
    with conversation(url).open_terminal() as terminal:
        with pytest.raises(InvalidRequest):
            terminal.resize(0, 10)
        terminal.write("")  # nothing typed, nothing sent: the terminal serves on
        terminal.write("exit\n")
        assert terminal.read_until("echo:exit")
    assert refused.value.code == "not_a_terminal"
    assert no_columns.value.fields["field"] == "cols"
    assert script.keys == [b"exit\n"]
    assert too_wide.value.fields["limit"] == 1000 and len(script.seen) == 2


def test_attaching_by_pid_rides_out_an_unavailable_instance(
    server: tuple[str, Script], conversation: Opener
) -> None:
    """Attaching to a running terminal is safe to try again (it starts nothing): a 503
    is retried as any other call is."""
    url, script = server
    script.plans = ["unavailable", "serve"]
    with conversation(url).attach_terminal(PID, cols=90) as terminal:
        terminal.write("exit\n")
        assert terminal.read_until("echo:exit")
    assert [seen["plan"] for seen in script.seen] == ["unavailable", "serve"]
    assert (script.seen[1]["pid"], script.seen[1]["cols"]) == (str(PID), "90")


def test_a_terminal_that_cannot_be_reached_is_a_connection_failure(
    conversation: Opener,
) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with pytest.raises(ConnectionFailed) as failed:
        conversation(url).open_terminal()
    assert failed.value.code == "connection_failed"


def test_close_stops_an_attachment_being_made_again_on_another_thread(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.plans = ["handoff-after-one"] + ["unavailable"] * 100
    patient = Retries(attempts=100, backoff_seconds=0.2, max_backoff_seconds=1.0)
    with SiestaClient(url, "t", retries=patient) as client:
        terminal = client.conversation("c1", org="o", user="u").open_terminal()
        terminal.write("a")  # then handed off: the reader attaches again, refused on
        read: list[bytes] = []
        reader = threading.Thread(target=lambda: read.append(terminal.read(60)))
        reader.start()
        assert wait_until(lambda: len(script.seen) >= 3, timeout=30), script.seen  # refused
        began = time.monotonic()
        terminal.close()
        closed_in = time.monotonic() - began
        reader.join(5)

    # the retries left would take over a minute; the try under way, milliseconds
    assert closed_in < 5.0, f"close waited {closed_in:.1f} s for the retries"
    assert not reader.is_alive() and read == [b""]  # the reader sees the end, no error
    assert len(script.seen) < 10  # no try after the close
    with pytest.raises(SiestaError) as closed:
        terminal.write("b")
    assert closed.value.code == "terminal_closed"
