"""``POST /v1/conversations/{id}/js``: the JavaScript executor (JsExecutorAgent).

A script error is a 200 result with ``error`` (and the logs so far), because
the model reads it and its turn goes on. With ``Accept: text/event-stream`` the
answer is a stream: one ``status`` event per ``logStatus`` as it happens, then
one ``result`` event with the same body as the JSON answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse

from siesta_contract.functions.js import JsResult, RunScriptBody

from api.deps import CallerDep, ContextDep, ServicesDep, requires
from api.responses import AGENT_FUNCTION, error_responses
from api.streaming import SSE_CONTENT, as_events, event_stream
from runtime.core.metrics import measured
from runtime.functions.js import JS_EXECUTOR
from runtime.tools.call import CallEvents, FailedWithResult

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
            "content": SSE_CONTENT,
        },
        **error_responses(*AGENT_FUNCTION),
    },
)
async def run_script(
    body: RunScriptBody,
    ctx: ContextDep,
    services: ServicesDep,
    caller: CallerDep,
    accept: Annotated[str | None, Header()] = None,
) -> JSONResponse | StreamingResponse:
    arguments = body.model_dump(mode="json", exclude_unset=True, exclude={"timeoutSeconds"})

    def run(events: CallEvents | None = None) -> dict[str, Any]:
        """The script's outcome as the model reads it (a failed script included)."""
        with measured(JS_EXECUTOR.name):
            try:
                result = services.tools.run_direct(
                    ctx,
                    JS_EXECUTOR,
                    "js_executor",
                    arguments,
                    caller.name,
                    events,
                    timeout_seconds=body.timeoutSeconds,
                )
            except FailedWithResult as failed:
                return failed.result
        return dict(result)

    if "text/event-stream" in (accept or ""):
        keepalive = services.settings.http.sse_keepalive_seconds
        return event_stream(lambda events: as_events(lambda: run(events)), keepalive)
    return JSONResponse(await to_thread.run_sync(run))
