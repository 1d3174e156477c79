"""``POST /v1/conversations/{id}/js``: the JavaScript executor (JsExecutorAgent).

A script error is a 200 result with ``error`` (and the logs so far), because
the model reads it and its turn goes on. With ``Accept: text/event-stream`` the
answer is a stream: one ``status`` event per ``logStatus`` as it happens, then
one ``result`` event with the same body as the JSON answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse

from api.deps import ContextDep, ServicesDep, requires
from api.responses import CONVERSATION, error_responses
from runtime.errors import SiestaError
from runtime.functions.js import JsResult, RunScriptBody
from runtime.metrics import measured

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}", tags=["js"], dependencies=requires("sandbox")
)


STREAM_DESCRIPTION = (
    "With `Accept: text/event-stream`: one `status` event per `logStatus(...)` as it "
    'happens (data `{"message": ...}`), then one `result` event whose data is this '
    "body (or `error` with the error body)."
)


@router.post(
    "/js",
    response_model=JsResult,
    response_model_exclude_none=True,
    responses={
        200: {
            "description": "The script's outcome (a script error is an outcome too). "
            + STREAM_DESCRIPTION,
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **error_responses(*CONVERSATION),
    },
)
async def run_script(
    body: RunScriptBody,
    ctx: ContextDep,
    services: ServicesDep,
    accept: Annotated[str | None, Header()] = None,
) -> JSONResponse | StreamingResponse:
    executor = services.js
    if "text/event-stream" not in (accept or ""):
        with measured("JsExecutorAgent"):
            result = await to_thread.run_sync(
                lambda: executor.run(ctx, body.code, body.timeoutSeconds)
            )
        return JSONResponse(result.model_dump(mode="json", exclude_none=True))

    loop = asyncio.get_running_loop()
    # Bounded: the pool passes on at most max_status_entries statuses per script.
    statuses: asyncio.Queue[str] = asyncio.Queue(maxsize=services.settings.js.max_status_entries)

    def offer(message: str) -> None:
        with contextlib.suppress(asyncio.QueueFull):  # never blocks the loop, never grows
            statuses.put_nowait(message)

    def on_status(message: str) -> None:  # called on the worker thread
        loop.call_soon_threadsafe(offer, message)

    def work() -> tuple[str, Any]:
        try:
            with measured("JsExecutorAgent"):
                result = executor.run(ctx, body.code, body.timeoutSeconds, on_status)
        except SiestaError as error:
            return "error", {"error": error.to_dict()}
        return "result", result.model_dump(mode="json", exclude_none=True)

    async def stream() -> AsyncIterator[str]:
        task = asyncio.ensure_future(to_thread.run_sync(work))
        # The worker thread's last statuses are queued before the task completes
        # (both go through the loop's callbacks in order), so none is lost here.
        while not task.done() or not statuses.empty():
            waiter = asyncio.ensure_future(statuses.get())
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                yield _event("status", {"message": waiter.result()})
            else:
                waiter.cancel()
        kind, data = await task
        yield _event(kind, data)

    return StreamingResponse(stream(), media_type="text/event-stream")


def _event(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
