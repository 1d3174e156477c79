"""What tracing costs: ``python -m bench.tracing``.

In this process, no service and no Docker: one span (``runtime.core.tracing.span``)
against a bare ``with`` block, and the trace middleware (``api/tracing.py``)
around an ASGI app that answers at once against the bare app; with tracing off
(the default: no provider) and on (an SDK provider, spans dropped by a no-op
processor so that exporting is not measured).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import timeit
from collections.abc import Callable

from opentelemetry.sdk.trace import TracerProvider
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.tracing import TraceContext
from runtime.core import tracing

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def _answer(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _drop(message: Message) -> None:
    return


async def _nothing() -> Message:
    return {"type": "http.request"}


def _scope(traceparent: bool) -> Scope:
    headers = [(b"x-siesta-org", b"org-a"), (b"authorization", b"Bearer x")]
    if traceparent:
        headers.append((b"traceparent", TRACEPARENT))
    return {"type": "http", "method": "POST", "path": "/v1/conversations/c/js", "headers": headers}


def _request_us(app: ASGIApp, scope: Scope, count: int) -> float:
    async def run() -> float:
        started = time.perf_counter()
        for _ in range(count):
            await app(dict(scope), _nothing, _drop)
        return (time.perf_counter() - started) / count * 1e6

    return min(asyncio.run(run()) for _ in range(5))


def _call_us(action: Callable[[], None], count: int) -> float:
    return min(timeit.repeat(action, number=count, repeat=5)) / count * 1e6


def _span() -> None:
    with tracing.span("bench", org="o", conversation="c"):
        pass


def _bare() -> None:
    with contextlib.nullcontext():
        pass


def _row(name: str, measured: float, baseline: float) -> str:
    return f"| {name} | {measured:.2f} µs | {baseline:.2f} µs | +{measured - baseline:.2f} µs |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=50_000)
    count = parser.parse_args().count
    print("| measure | with tracing code | baseline | cost |")
    print("|---|---|---|---|")
    for mode in ("off", "on"):
        if mode == "on":
            tracing.install(TracerProvider())
        middleware = TraceContext(_answer)
        print(_row(f"one span, tracing {mode}", _call_us(_span, count), _call_us(_bare, count)))
        for given in (False, True):
            scope = _scope(given)
            what = "with" if given else "without"
            print(
                _row(
                    f"request {what} traceparent, tracing {mode}",
                    _request_us(middleware, scope, count),
                    _request_us(_answer, scope, count),
                )
            )
    tracing.install(None)


if __name__ == "__main__":
    main()
