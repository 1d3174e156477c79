"""Calls that stream (command output, script statuses), and calls whose caller went away.

Both keep the call on a worker thread (the runtime is synchronous) and watch the
HTTP side from the event loop: output chunks and statuses become server-sent
events as they come; a disconnected client cancels the call, so a command's
process group dies and the conversation's lease is released at once instead of
at the command's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from anyio import to_thread
from fastapi import Request
from fastapi.responses import StreamingResponse

from api.errors import status_for
from runtime.core.cancellation import Cancellation
from runtime.core.errors import SiestaError
from runtime.tools.call import CallEvents

_T = TypeVar("_T")
STREAM_QUEUE_CHUNKS = 256
"""Events waiting for a slow client; more are dropped (the result has all output)."""


async def until_disconnected(
    request: Request, work: Callable[[], _T], cancellation: Cancellation
) -> _T:
    """Run ``work`` on a thread; if the client disconnects first, cancel it (and
    still wait for it, so that it releases what it holds)."""
    task = asyncio.ensure_future(to_thread.run_sync(work))
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            cancellation.cancel()
        return await task
    finally:
        watcher.cancel()


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


Work = Callable[[CallEvents], tuple[str, Any]]
"""A call run on a worker thread with the stream's callbacks: its last event's
kind (``result`` or ``error``) and data."""


SSE_CONTENT = {
    "text/event-stream": {
        "schema": {
            "description": "One server-sent event: its name and its data (JSON text); "
            "keepalive comments are not events",
            "type": "object",
            "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
            "required": ["data"],
        }
    }
}
"""A streamed answer's media type in the OpenAPI document, described event by event
(what SSE-aware tools validate each event against)."""
KEEPALIVE = ": keepalive\n\n"
"""An SSE comment: it keeps a silent stream's connection open; clients skip it."""


def event_stream(work: Work, keepalive: float) -> StreamingResponse:
    """Server-sent events of one call: ``output`` (a command's chunks) and ``status``
    (a script's ``logStatus``) as they happen, then the call's last event; a
    ``KEEPALIVE`` comment after ``keepalive`` seconds without any. A client that goes
    away cancels the call."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=STREAM_QUEUE_CHUNKS)
    cancellation = Cancellation()

    def offer(item: tuple[str, Any]) -> None:
        with contextlib.suppress(asyncio.QueueFull):  # never blocks the loop, never grows
            queue.put_nowait(item)

    def on_output(stream: str, data: bytes) -> None:  # on the worker thread
        text = data.decode("utf-8", errors="replace")
        loop.call_soon_threadsafe(offer, ("output", {"stream": stream, "text": text}))

    def on_status(message: str) -> None:  # on the worker thread
        loop.call_soon_threadsafe(offer, ("status", {"message": message}))

    events = CallEvents(status=on_status, output=on_output, cancellation=cancellation)

    async def stream() -> AsyncIterator[str]:
        task = asyncio.ensure_future(to_thread.run_sync(lambda: work(events)))
        getter: asyncio.Future[tuple[str, Any]] | None = None
        try:
            # Events the thread queued are delivered before its completion (both go
            # through the loop's callbacks in order), so none is lost at the end.
            while not task.done() or not queue.empty():
                if getter is None:
                    getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {getter, task}, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    yield _event(*getter.result())
                    getter = None
                elif not done:
                    yield KEEPALIVE
            yield _event(*await task)
        finally:
            if getter is not None:
                getter.cancel()
            # The client went away: stop the call. Its thread then ends on its
            # own and releases the conversation (nothing here may await any more).
            if not task.done():
                cancellation.cancel()

    return StreamingResponse(stream(), media_type="text/event-stream")


def as_events(call: Callable[[], Any]) -> tuple[str, Any]:
    """``("result", value)``, or ``("error", {"error": body, "status": N})`` when it
    raised ours (``status``: what the answer's status would have been unstreamed)."""
    try:
        return "result", call()
    except SiestaError as error:
        return "error", {"error": error.to_dict(), "status": status_for(error)}


def _event(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
