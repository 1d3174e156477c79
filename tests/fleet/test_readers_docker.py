"""A reader of a process's output that loses its instance (stopped, killed) goes on
through another from where it was, missing nothing the sandbox's agent still keeps,
while the process runs on; an instance stopping (SIGTERM) hands its streams and
terminals off at once instead of holding them for its drain time.
``tests/fleet/conftest.py``'s fleet, its own in this module (its instances are killed
and stopped, and started again)."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Generator

import httpx
import pytest
import websocket

from siesta_client import ProcessEnded, ProcessOutput, Retries, SiestaClient, Terminal
from tests.fleet.conftest import Fleet
from tests.helpers import TOKEN, ServiceProcess, headers, new_conversation
from tests.terminals import next_message, screen_until

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]

Events = Generator[tuple[str, str, str | None], None, None]
"""(event, data, id) of a server-sent event stream."""
LINES = 200
COUNTER = f"for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.02; done"


def start(client: httpx.Client, conversation: str) -> int:
    started = client.post(
        f"/v1/conversations/{conversation}/sandbox/processes",
        json={"command": COUNTER},
        headers=headers(),
    )
    assert started.status_code == 201, started.text
    pid: int = started.json()["pid"]
    return pid


def events(service: ServiceProcess | str, conversation: str, pid: int, last: str | None) -> Events:
    """(event, data, id) of the process's output stream through ``service``."""
    base = service if isinstance(service, str) else service.base_url
    wanted = {**headers(), "Accept": "text/event-stream"}
    if last is not None:
        wanted["Last-Event-ID"] = last
    url = f"{base}/v1/conversations/{conversation}/sandbox/processes/{pid}"
    with httpx.stream("GET", url, headers=wanted, timeout=30) as answer:
        assert answer.status_code == 200, answer.read()
        name, data, event_id = "", "", None
        for line in answer.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line.startswith("id: "):
                event_id = line[4:]
            elif not line and name:
                yield name, data, event_id
                name, data, event_id = "", "", None


def read(stream: Events, text: list[str], until_lines: int | None) -> tuple[str | None, str]:
    """Output into ``text`` until ``until_lines`` lines (``None``: the end); (the last
    id, the event that stopped it). The stream is closed (its connection too) either way."""
    with contextlib.closing(stream):
        return _read(stream, text, until_lines)


def _read(stream: Events, text: list[str], until_lines: int | None) -> tuple[str | None, str]:
    last = None
    for name, data, event_id in stream:
        if name == "output":
            text.append(json.loads(data)["text"])
            last = event_id
            if until_lines is not None and "".join(text).count("\n") >= until_lines:
                return last, "enough"
        elif name in ("end", "gap", "error"):
            return last, f"{name} {data}"
    return last, "closed"


def test_a_reader_goes_on_through_another_instance_from_where_it_was(fleet: Fleet) -> None:
    conversation = new_conversation()
    first, second, third = fleet.instances
    with fleet.client() as client:
        pid = start(client, conversation)
    text: list[str] = []
    last, why = read(events(first, conversation, pid, "0"), text, 40)  # from its start
    assert why == "enough" and last is not None
    # The client goes away mid-stream; later it reads on through another instance.
    last, why = read(events(second, conversation, pid, last), text, 80)
    assert why == "enough" and last is not None

    fleet.stop(0, signal.SIGKILL, within=10)  # lost; the process runs on in its sandbox
    last, why = read(events(third, conversation, pid, last), text, None)
    assert why.startswith("end "), why
    assert json.loads(why[4:])["exitCode"] == 0
    lines = "".join(text).splitlines()
    assert lines == [f"line-{i}" for i in range(1, LINES + 1)]  # each once, in order

    # Again from the start (its ring of 1 MiB keeps all of it), after it ended: all of
    # it, then the end.
    text = []
    _, why = read(events(second, conversation, pid, "0"), text, None)
    assert why.startswith("end ") and "".join(text).count("\n") == LINES
    with httpx.Client(base_url=third.base_url, timeout=30) as client:
        client.delete(f"/v1/conversations/{conversation}", headers=headers())


STOP_WITHIN = 20.0
"""Seconds a stopping instance may take: its drain time is 607 s (the default), so one
that held its streams instead of handing them off would not stop in time."""


def test_a_stopping_instance_hands_its_readers_off_and_stops_at_once(fleet: Fleet) -> None:
    """The Python client follows a process through the proxy; the instance serving the
    stream gets SIGTERM (a rollout). Its stream closes without the end, the client reads
    on through another instance from its offset, and the instance stops within seconds."""
    siesta = SiestaClient(fleet.url, TOKEN, retries=Retries(attempts=8))
    conversation = siesta.conversation(
        new_conversation(), org="org-a", user="user-1", base_image="debian-base"
    )
    started = conversation.start_process(COUNTER)
    text: list[str] = []
    ended: list[ProcessEnded] = []

    def follow() -> None:
        for event in conversation.follow_process(started.pid):
            if isinstance(event, ProcessOutput):
                text.append(event.text)
            elif isinstance(event, ProcessEnded):
                ended.append(event)

    reader = threading.Thread(target=follow)
    reader.start()
    deadline = time.monotonic() + 30
    while "".join(text).count("\n") < 20:
        assert time.monotonic() < deadline and reader.is_alive(), text
        time.sleep(0.05)
    route = f"/v1/conversations/{conversation.id}/sandbox/processes/{started.pid}"
    serving = [index for path, index in fleet.proxy.served if path == route][-1]
    fleet.stop(serving, signal.SIGTERM, within=STOP_WITHIN)
    reader.join(60)
    try:
        assert not reader.is_alive()
        assert "".join(text).splitlines() == [f"line-{i}" for i in range(1, LINES + 1)]
        assert ended and ended[0].process.exitCode == 0
        assert len(fleet.proxy.instances_of(route)) >= 2
    finally:
        conversation.delete()
        siesta.close()


def test_a_stopping_instance_hands_its_terminals_off(fleet: Fleet) -> None:
    """A terminal's instance gets SIGTERM: it says ``reconnect`` and closes with 1012,
    the shell is not hung up, and attaching again (through another instance) goes on
    in the same shell."""
    conversation = new_conversation()
    url = f"ws{fleet.url.removeprefix('http')}/v1/conversations/{conversation}/sandbox"
    header = [f"{k}: {v}" for k, v in headers().items()]
    terminal = websocket.create_connection(f"{url}/terminal", header=header, timeout=30)
    pid = json.loads(terminal.recv())["pid"]
    terminal.send_binary(b"MARK=kept; echo $((6*7))-before\n")
    screen_until(terminal, "42-before")
    route = f"/v1/conversations/{conversation}/sandbox/terminal"
    serving = [index for path, index in fleet.proxy.served if path == route][-1]

    fleet.stop(serving, signal.SIGTERM, within=STOP_WITHIN)
    told = next_message(terminal)
    opcode, frame = terminal.recv_data(control_frame=True)
    terminal.shutdown()  # type: ignore[no-untyped-call]  # closed by the service
    again = websocket.create_connection(f"{url}/terminal?pid={pid}", header=header, timeout=30)
    assert json.loads(again.recv()) == {"type": "started", "pid": pid}
    again.send_binary(b"echo $MARK-after\n")
    screen_until(again, "kept-after")  # the same shell: its variable is still set
    again.send_binary(b"exit\n")
    assert next_message(again)["type"] == "exit"
    again.shutdown()  # type: ignore[no-untyped-call]
    with httpx.Client(base_url=fleet.url, timeout=60) as client:
        client.delete(f"/v1/conversations/{conversation}", headers=headers())
    assert told == {"type": "reconnect", "pid": pid}
    assert opcode == websocket.ABNF.OPCODE_CLOSE
    assert int.from_bytes(frame[:2], "big") == 1012


def test_the_clients_terminal_rides_out_its_instance_stopping_and_dying(fleet: Fleet) -> None:
    """The Python client's terminal, read by a thread of its own while the test types,
    as a terminal window does: its instance is rolled (SIGTERM: it is told to reconnect),
    then the next one is killed (SIGKILL: the connection is cut). Each time the client
    attaches again through another instance by itself, and the same shell takes the
    next keys."""
    siesta = SiestaClient(fleet.url, TOKEN, retries=Retries(attempts=8))
    conversation = siesta.conversation(
        new_conversation(), org="org-a", user="user-1", base_image="debian-base"
    )
    route = f"/v1/conversations/{conversation.id}/sandbox/terminal"
    screen = bytearray()

    def shown(text: str) -> None:
        deadline = time.monotonic() + 30
        while text.encode() not in screen:
            assert time.monotonic() < deadline, f"no {text!r} in {bytes(screen[-500:])!r}"
            time.sleep(0.05)

    try:
        with conversation.open_terminal(cols=100, rows=30) as terminal:
            reader = threading.Thread(target=lambda: _read_all(terminal, screen))
            reader.start()
            terminal.write("MARK=kept; echo $((6*7))-before\n")
            shown("42-before")
            for how in (signal.SIGTERM, signal.SIGKILL):
                serving = [index for path, index in fleet.proxy.served if path == route][-1]
                fleet.stop(serving, how, within=STOP_WITHIN)
                terminal.write(f"echo $MARK-after-{how.name}; stty size\n")
                shown(f"kept-after-{how.name}\r\n30 100")  # the same shell, its size kept
            terminal.write("exit 4\n")
            reader.join(30)
        assert not reader.is_alive()
        assert terminal.exit is not None and terminal.exit.exit_code == 4
        assert len(fleet.proxy.instances_of(route)) == 3
    finally:
        conversation.delete()
        siesta.close()


def _read_all(terminal: Terminal, screen: bytearray) -> None:
    while chunk := terminal.read():
        screen.extend(chunk)
