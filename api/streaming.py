"""Commands that stream their output, and commands whose caller went away.

Both keep the sandbox call on a worker thread (the runtime is synchronous) and
watch the HTTP side from the event loop: output chunks become server-sent
events as they come; a disconnected client cancels the command, so its process
group dies and the conversation's lease is released at once instead of at the
command's timeout.
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

from runtime.cancellation import Cancellation
from runtime.context import CallContext
from runtime.errors import SiestaError
from runtime.functions.sandbox import RunCommandArgs
from runtime.metrics import measured
from runtime.services import Services

_T = TypeVar("_T")
STREAM_QUEUE_CHUNKS = 256
"""Output chunks waiting for a slow client; more are dropped (the result has all)."""


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


def streamed_command(
    body: RunCommandArgs, ctx: CallContext, services: Services
) -> StreamingResponse:
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(maxsize=STREAM_QUEUE_CHUNKS)
    cancellation = Cancellation()

    def offer(item: tuple[str, bytes]) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            chunks.put_nowait(item)

    def on_output(stream: str, data: bytes) -> None:  # on the worker thread
        loop.call_soon_threadsafe(offer, (stream, data))

    def work() -> tuple[str, Any]:
        try:
            with measured("runCommand"):
                result = services.sandbox.run_command(
                    ctx,
                    body.command,
                    body.timeoutSeconds,
                    body.files,
                    on_output=on_output,
                    cancellation=cancellation,
                )
        except SiestaError as error:
            return "error", {"error": error.to_dict()}
        return "result", result.model_dump(mode="json")

    async def events() -> AsyncIterator[str]:
        task = asyncio.ensure_future(to_thread.run_sync(work))
        try:
            # Chunks the thread queued are delivered before its completion (both go
            # through the loop's callbacks in order), so none is lost at the end.
            while not task.done() or not chunks.empty():
                getter = asyncio.ensure_future(chunks.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    stream, data = getter.result()
                    text = data.decode("utf-8", errors="replace")
                    yield _event("output", {"stream": stream, "text": text})
                else:
                    getter.cancel()
            kind, data = await task
            yield _event(kind, data)
        finally:
            # The client went away: stop the command. Its thread then ends on its
            # own and releases the conversation (nothing here may await any more).
            if not task.done():
                cancellation.cancel()

    return StreamingResponse(events(), media_type="text/event-stream")


def _event(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
