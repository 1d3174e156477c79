"""What both clients do around one request: its timeout, which failures are tried
again, what a failure says, and reading a streamed answer's events."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import httpx

from siesta_client._ops import MUTATING, Op, raise_for_error
from siesta_client._retry import Retries, new_key, retryable
from siesta_client.errors import ClientTimeout, ConnectionFailed, SiestaError, error_from

T = TypeVar("T")
EVENT_STREAM = "text/event-stream"
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Failures before the request left: the service cannot have run it."""


def configured(base_url: str | None, token: str | None) -> tuple[str, str]:
    """The service's address and token, as given or from ``SIESTA_URL`` and
    ``SIESTA_API_TOKEN``."""
    base_url = base_url or os.environ.get("SIESTA_URL")
    token = token or os.environ.get("SIESTA_API_TOKEN")
    for value, name in (
        (base_url, "base_url (or SIESTA_URL)"),
        (token, "token (or SIESTA_API_TOKEN)"),
    ):
        if not value:
            msg = f"the client needs {name}"
            raise ValueError(msg)
    assert base_url is not None and token is not None
    return base_url, token


def build(http: httpx.Client | httpx.AsyncClient, op: Op[Any], key: str | None) -> httpx.Request:
    """The request of ``op``: its read timeout stretched by how long it may run, and an
    ``Idempotency-Key`` (the same for every attempt) when it changes anything."""
    request = http.build_request(
        op.method,
        op.path,
        json=op.json,
        files=op.files,
        params=op.params,
        headers=op.headers,
        timeout=stretched(http.timeout, op.runs_for),
    )
    if op.method in MUTATING:
        request.headers["Idempotency-Key"] = key or new_key()
    if op.events is not None:
        request.headers["Accept"] = EVENT_STREAM
    request.read()  # the same bytes for every attempt (a multipart boundary too)
    return request


def stretched(timeout: httpx.Timeout, runs_for: float | None) -> httpx.Timeout:
    """A call that may run ``runs_for`` seconds waits that long plus the read timeout
    (the margin for the service's own work: the lease, making or resuming the sandbox,
    staging files)."""
    if runs_for is None or timeout.read is None:
        return timeout
    return httpx.Timeout(
        connect=timeout.connect,
        read=timeout.read + runs_for,
        write=timeout.write,
        pool=timeout.pool,
    )


def failure(
    op: Op[Any], request: httpx.Request, error: httpx.TransportError, attempt: int, retries: Retries
) -> SiestaError | None:
    """What to raise after ``error``, or ``None`` to try again. The client's own read
    timeout is never tried again: it closed the connection, so the call was stopped or
    still runs. A connection lost after sending is: a mutating call carries its key,
    so the service never runs it twice (a command's result is collected instead)."""
    if isinstance(error, httpx.ReadTimeout):
        return timed_out(op, request)
    if retryable(error) and attempt < retries.attempts:
        return None
    msg = f"no answer from {request.url} after {attempt} tries: {error}"
    fields: dict[str, Any] = {"limit": retries.attempts, "unit": "tries"}
    if request.method in MUTATING and not isinstance(error, NOT_SENT):
        fields["idempotencyKey"] = key = request.headers["Idempotency-Key"]
        msg += (
            "; the last try may have reached the service, so whether the call ran is not "
            f"known (calling again with its Idempotency-Key, {key}, never runs it twice)"
        )
    return ConnectionFailed(msg, code="connection_failed", status=0, fields=fields)


def timed_out(op: Op[Any], request: httpx.Request) -> ClientTimeout:
    waited = request.extensions.get("timeout", {}).get("read")
    why = f"{op.runs_for:g} s it may run, plus " if op.runs_for is not None else ""
    what = f"{request.method} {request.url.path}"
    if op.abandoned == "stopped":
        outcome = (
            "the client closed the connection, and the service stops a call whose caller "
            "goes away: it was stopped (a command's processes killed; what it did until "
            "then stays in the workspace). Give it a longer timeout, or stream its output"
        )
    else:
        outcome = (
            "the client closed the connection, but the service finishes this call: it may "
            "still be running, and its effects happen all the same"
        )
    msg = f"no answer to {what} within {waited} s ({why}the client's read timeout); {outcome}"
    fields = {"limit": waited, "unit": "seconds", "outcome": op.abandoned}
    return ClientTimeout(msg, code="client_timeout", status=0, fields=fields)


def ends_stream(request: httpx.Request) -> httpx.RemoteProtocolError:
    msg = "the event stream ended before its last event"
    return httpx.RemoteProtocolError(msg, request=request)


@dataclass
class EventLines:
    """Server-sent events read line by line: ``feed`` returns (event, its data as JSON,
    its id) at the blank line that ends one, else ``None`` (keepalive comments too)."""

    name: str = ""
    data: list[str] = field(default_factory=list)
    event_id: str = ""

    def feed(self, line: str) -> tuple[str, Any, str] | None:
        if line.startswith(":"):  # a keepalive comment
            return None
        if line:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self.name = value
            elif name == "data":
                self.data.append(value)
            elif name == "id":
                self.event_id = value
            return None
        ended = (self.name, json.loads("\n".join(self.data)), self.event_id) if self.data else None
        self.name, self.data, self.event_id = "", [], ""
        return ended


class Answer(Generic[T]):
    """Reads one answer: a JSON (or raw) body, or a stream of server-sent events whose
    last one (``result`` or ``error``) is the call's result."""

    def __init__(self, op: Op[T], response: httpx.Response) -> None:
        self.op = op
        self.response = response
        self.streamed = response.headers.get("content-type", "").startswith(EVENT_STREAM)
        self._lines = EventLines()
        self.done = False
        self.result: T | None = None

    def read(self) -> T:
        """The call's result (an error answer raises)."""
        if not self.streamed:
            self.response.read()
            return self._body()
        for line in self.response.iter_lines():
            self.line(line)
            if self.done:
                return cast(T, self.result)
        raise ends_stream(self.response.request)

    async def aread(self) -> T:
        if not self.streamed:
            await self.response.aread()
            return self._body()
        async for line in self.response.aiter_lines():
            self.line(line)
            if self.done:
                return cast(T, self.result)
        raise ends_stream(self.response.request)

    def _body(self) -> T:
        raise_for_error(self.response)
        return self.op.read(self.response)

    def line(self, line: str) -> None:
        """One line of the event stream; ``done`` after its last event."""
        event = self._lines.feed(line)
        if event is not None:
            self._event(event[0], event[1])

    def _event(self, name: str, data: Any) -> None:
        if name == "result":
            self.result = self.op.read(httpx.Response(200, json=data))
            self.done = True
        elif name == "error":
            status = int(data.get("status", self.response.status_code))
            raise error_from(status, data["error"])
        elif self.op.events is not None:
            self.op.events(name, data)
