"""A reader of a process's output that loses its instance (stopped, killed) goes on
through another from where it was, missing nothing the sandbox's agent still keeps,
while the process runs on; ``tests/fleet/conftest.py``'s fleet, its own in this module
(one of its instances is killed)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.fleet.conftest import Fleet
from tests.helpers import ServiceProcess, headers, new_conversation

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]

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


def events(
    service: ServiceProcess | str, conversation: str, pid: int, last: str | None
) -> Iterator[tuple[str, str, str | None]]:
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


def read(
    stream: Iterator[tuple[str, str, str | None]], text: list[str], until_lines: int | None
) -> tuple[str | None, str]:
    """Output into ``text`` until ``until_lines`` lines (``None``: the end); (the last
    id, the event that stopped it)."""
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

    first.process.kill()  # SIGKILL: an instance lost; the process runs on in its sandbox
    first.process.wait(10)
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
