"""Draining: after SIGTERM an instance says it is not ready (``/readyz`` answers 503
with a ``draining`` check) and goes on serving, new requests as well as those in
flight, until none is in flight or its drain time is over; then ``serve`` stops
(``cli/server.py``). A request counts while its ASGI call runs: a streamed answer
(runCommand's events, a process's output) and a WebSocket (a terminal) until they end.

While draining, every answer says ``Connection: close``: a client's next request
opens a new connection, which the load balancer sends to another instance once it
has seen this one is not ready.

A stream the client can resume elsewhere is handed off instead of held: a process's
output stream (``Last-Event-ID`` reads on through any instance) closes without its
``end`` event, and a terminal closes with 1012 (service restart) without hanging the
terminal up. Both wait on ``Drain.handing_off``; neither holds a roll up for the
drain time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HANDOFF_POLL_SECONDS = 0.25
"""How soon a resumable stream notices a drain and closes."""


class Drain:
    """Whether this instance drains, and how many requests it is serving."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.in_flight = 0
        self.deadline: float | None = None
        self._clock = clock

    @property
    def draining(self) -> bool:
        return self.deadline is not None

    def begin(self) -> None:
        """Start draining (again: no change). Safe in a signal handler."""
        if self.deadline is None:
            self.deadline = self._clock() + self.seconds

    async def handing_off(self) -> None:
        """Returns once this instance drains (within ``HANDOFF_POLL_SECONDS``): a
        polled flag, since ``begin`` runs in a signal handler, where waking an
        asyncio waiter is not safe."""
        while self.deadline is None:
            await asyncio.sleep(HANDOFF_POLL_SECONDS)

    def over(self) -> bool:
        """Draining, and nothing is in flight or the drain time is up."""
        if self.deadline is None:
            return False
        return self.in_flight == 0 or self._clock() >= self.deadline


class DrainMiddleware:
    """Counts the requests in flight; while draining, answers close their connection."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        drain = self.drain

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and drain.draining:
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*kept, (b"connection", b"close")]}
            await send(message)

        drain.in_flight += 1
        try:
            await self.app(scope, receive, send_closing)
        finally:
            drain.in_flight -= 1
