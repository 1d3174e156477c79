"""Following a process's output from a position, across reconnects.

The service streams a process's output as server-sent events, each ``output`` event's
``id`` the offset its output has reached. A stream that closes before its ``end``
event (the instance serving it stopped and handed it off, or the connection broke),
or ends with an ``error`` saying to connect again, is read on from the last offset
through whatever instance the next connection reaches:
the sandbox's agent keeps the output (a ring of ``SIESTA_PROCESSES__RING_BYTES``), so
nothing it still keeps is missed or repeated. Only the sync client follows for now.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from siesta_contract.processes import ProcessPublic

from siesta_client._ops import Op, raise_for_error
from siesta_client._retry import RETRYABLE_STATUSES, Retries
from siesta_client._sending import EVENT_STREAM, EventLines
from siesta_client.errors import ConnectionFailed, error_from

RECONNECT_CODES = frozenset({"sandbox_unavailable"})
"""An ``error`` event that says to connect again (the instance's channel to the
sandbox closed): read on from the offset, as after a cut."""


@dataclass(frozen=True)
class ProcessOutput:
    stream: str
    """``stdout`` or ``stderr``."""
    text: str
    offset: int
    """Where the process's output stands after this text: ``follow_process(start=)``
    reads on from here."""


@dataclass(frozen=True)
class OutputGap:
    """Output from the position asked for is no longer kept (the ring moved past it)."""

    lost_bytes: int


@dataclass(frozen=True)
class ProcessEnded:
    """The last event: how the process ended."""

    process: ProcessPublic


ProcessEvent = ProcessOutput | OutputGap | ProcessEnded


def follow(
    http: httpx.Client, op: Op[ProcessPublic], start: int, retries: Retries
) -> Iterator[ProcessEvent]:
    """``op``'s process's events from offset ``start`` to its end. A stream cut short
    is opened again from where it was; ``retries.attempts`` reconnects in a row that
    bring nothing raise ``ConnectionFailed``."""
    position = start
    failures = 0
    while True:
        request = http.build_request(
            "GET",
            op.path,
            params={"from": position},
            headers={**op.headers, "Accept": EVENT_STREAM},
        )
        answer: httpx.Response | None = None
        why = "the stream closed before its end event"
        try:
            answer = http.send(request, stream=True)
            with contextlib.closing(answer):
                if answer.status_code in RETRYABLE_STATUSES:
                    why = f"answered {answer.status_code}"
                else:
                    if answer.status_code != 200:
                        answer.read()
                        raise_for_error(answer)
                    for name, data, offset in _events(answer):
                        if name == "error" and data.get("code") in RECONNECT_CODES:
                            why = f"{data.get('code')}: {data.get('message')}"
                            break  # the stream's instance lost its way to the sandbox
                        event = _event(name, data, offset)
                        if event is None:
                            continue
                        if isinstance(event, ProcessOutput):
                            position = event.offset
                        failures = 0  # it moved on: the next cut gets every try again
                        yield event
                        if isinstance(event, ProcessEnded):
                            return
        except httpx.TransportError as error:
            why = f"{type(error).__name__}: {error}"
        failures += 1
        if failures >= retries.attempts:
            msg = (
                f"following process output at {request.url.path} from offset {position}: "
                f"{why}, {failures} tries in a row"
            )
            fields: dict[str, Any] = {"limit": retries.attempts, "unit": "tries"}
            raise ConnectionFailed(msg, code="connection_failed", status=0, fields=fields)
        time.sleep(retries.delay(failures, answer))


def _events(response: httpx.Response) -> Iterator[tuple[str, Any, str]]:
    """(event, its data, its id) of a server-sent event stream."""
    lines = EventLines()
    for line in response.iter_lines():
        event = lines.feed(line)
        if event is not None:
            yield event


def _event(name: str, data: Any, event_id: str) -> ProcessEvent | None:
    if name == "output":
        return ProcessOutput(data["stream"], data["text"], int(event_id))
    if name == "gap":
        return OutputGap(int(data["lostBytes"]))
    if name == "end":
        return ProcessEnded(ProcessPublic.model_validate(data))
    if name == "error":
        raise error_from(500, data)
    return None  # an event of a newer service: not this client's
