"""The agent's sandbox functions: the model's tool call body in, its result out.

Bodies and results are the function models (``siesta_contract.functions.sandbox``),
the same ones the tool catalog's schemas are generated from. Every call goes
through the tool executor like a ``/v1/tools/execute`` call: the deployment's
policy for the function (``SIESTA_TOOLS__FUNCTION_POLICIES``, else the
reference's rule, which asks before ``publishFiles``) and one entry in the
executions log. A call that needs approval answers 202 ``approval_required``
with the ``approvalId`` to decide (``POST /v1/tools/approvals/{id}``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel

from siesta_contract.functions.sandbox import (
    ListFilesArgs,
    ListFilesResult,
    PublishFilesArgs,
    PublishFilesResult,
    ReadFileArgs,
    ReadFileResult,
    RunCommandArgs,
    RunCommandResult,
    WriteFileArgs,
    WriteFileResult,
)

from api.deps import CallerDep, ContextDep, ServicesDep, requires
from api.responses import SANDBOX, error_responses
from api.streaming import SSE_CONTENT, as_events, event_stream, until_disconnected
from runtime.core.cancellation import Cancellation
from runtime.core.context import CallContext
from runtime.core.metrics import measured
from runtime.functions.base import FunctionSpec
from runtime.functions.sandbox import (
    SANDBOX as SANDBOX_FUNCTIONS,
)
from runtime.services import Services
from runtime.tools.call import CallEvents

RUN_COMMAND, WRITE_FILE, READ_FILE, LIST_FILES, PUBLISH_FILES = (
    next(spec for spec in SANDBOX_FUNCTIONS if spec.name == name)
    for name in ("runCommand", "writeFile", "readFile", "listFiles", "publishFiles")
)

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox",
    tags=["sandbox"],
    dependencies=requires("sandbox"),
    responses=error_responses(*SANDBOX),
)


def call(
    services: Services,
    ctx: CallContext,
    function: FunctionSpec,
    body: BaseModel,
    caller: str,
    events: CallEvents | None = None,
) -> Any:
    """One sandbox function through the executor (policy, log), timed by its name."""
    with measured(function.name):
        arguments = body.model_dump(mode="json", exclude_unset=True)
        return services.tools.run_direct(ctx, function, "sandbox", arguments, caller, events)


@router.post(
    "/runCommand",
    response_model=RunCommandResult,
    responses={
        200: {
            "description": "The command's result. With `Accept: text/event-stream`: `output` "
            'events (`{"stream": "stdout" | "stderr", "text": ...}`, up to the output limit '
            "per stream) while it runs, then one `result` event with this body (or `error` "
            'with the error body and the status it would have had: `{"error": ..., "status"}`).',
            "content": SSE_CONTENT,
        }
    },
)
async def run_command(
    body: RunCommandArgs,
    ctx: ContextDep,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    accept: Annotated[str | None, Header()] = None,
) -> Any:
    """Run ``bash -lc command`` in ``/mnt/work``; a nonzero exit is a normal result.

    A client that goes away before the result cancels the command (its process
    group is killed) and the conversation is free again at once.
    """
    if "text/event-stream" in (accept or ""):
        return event_stream(
            lambda events: as_events(
                lambda: call(services, ctx, RUN_COMMAND, body, caller.name, events)
            ),
            services.settings.http.sse_keepalive_seconds,
        )
    cancellation = Cancellation()
    events = CallEvents(cancellation=cancellation)
    return await until_disconnected(
        request, lambda: call(services, ctx, RUN_COMMAND, body, caller.name, events), cancellation
    )


@router.post("/writeFile", response_model=WriteFileResult)
def write_file(
    body: WriteFileArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> Any:
    """Write UTF-8 text to a path inside ``/mnt/work``."""
    return call(services, ctx, WRITE_FILE, body, caller.name)


@router.post("/readFile", response_model=ReadFileResult)
def read_file(body: ReadFileArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep) -> Any:
    """Read a workspace file: text as text, binary as base64, with truncation reported."""
    return call(services, ctx, READ_FILE, body, caller.name)


@router.post("/listFiles", response_model=ListFilesResult)
def list_files(
    body: ListFilesArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> Any:
    """List one workspace folder (not recursive)."""
    return call(services, ctx, LIST_FILES, body, caller.name)


@router.post("/publishFiles", response_model=PublishFilesResult)
def publish_files(
    body: PublishFilesArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> Any:
    """Publish workspace files as conversation artifacts; failures are reported per path.

    Publishing asks for approval first unless the deployment's policy says otherwise
    (``SIESTA_TOOLS__FUNCTION_POLICIES='{"publishFiles": "enabled"}'``)."""
    return call(services, ctx, PUBLISH_FILES, body, caller.name)
