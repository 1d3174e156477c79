"""``POST /v1/conversations/{id}/js``: the JavaScript executor (JsExecutorAgent).

A script error is a 200 result with ``error`` (and the logs so far), because
the model reads it and its turn goes on. With ``Accept: text/event-stream`` the
answer is a stream: one ``status`` event per ``logStatus`` as it happens, then
one ``result`` event with the same body as the JSON answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from api.deps import Authenticated, ContextDep, ServicesDep
from runtime.errors import SiestaError
from runtime.metrics import measured

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}", tags=["js"], dependencies=Authenticated
)


class RunScript(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    timeoutSeconds: float | None = Field(None, gt=0)


@router.post("/js", response_model=None)
async def run_script(
    body: RunScript,
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
        return JSONResponse(result)

    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_status(message: str) -> None:
        loop.call_soon_threadsafe(events.put_nowait, ("status", {"message": message}))

    def work() -> None:
        try:
            with measured("JsExecutorAgent"):
                outcome: tuple[str, Any] = (
                    "result",
                    executor.run(ctx, body.code, body.timeoutSeconds, on_status),
                )
        except SiestaError as error:
            outcome = ("error", {"error": error.to_dict()})
        loop.call_soon_threadsafe(events.put_nowait, outcome)

    async def stream() -> AsyncIterator[str]:
        task = asyncio.ensure_future(to_thread.run_sync(work))
        while True:
            kind, data = await events.get()
            yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            if kind != "status":
                break
        await task

    return StreamingResponse(stream(), media_type="text/event-stream")
