"""The agent's sandbox functions: the model's tool call body in, its result out.

Bodies and results are the function models (``runtime/functions/sandbox.py``),
the same ones the tool catalog's schemas are generated from. Handlers are plain
``def``: the runtime is synchronous (the Docker SDK is), so FastAPI runs each
call in its thread pool.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse

from api.deps import ContextDep, ServicesDep, requires
from api.responses import SANDBOX, error_responses
from api.streaming import streamed_command, until_disconnected
from runtime.cancellation import Cancellation
from runtime.functions.sandbox import (
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
from runtime.metrics import measured

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox",
    tags=["sandbox"],
    dependencies=requires("sandbox"),
    responses=error_responses(*SANDBOX),
)


@router.post(
    "/runCommand",
    response_model=RunCommandResult,
    responses={
        200: {
            "description": "The command's result. With `Accept: text/event-stream`: `output` "
            'events (`{"stream": "stdout" | "stderr", "text": ...}`, up to the output limit '
            "per stream) while it runs, then one `result` event with this body (or `error` "
            "with the error body).",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def run_command(
    body: RunCommandArgs,
    ctx: ContextDep,
    services: ServicesDep,
    request: Request,
    accept: Annotated[str | None, Header()] = None,
) -> RunCommandResult | StreamingResponse:
    """Run ``bash -lc command`` in ``/mnt/work``; a nonzero exit is a normal result.

    A client that goes away before the result cancels the command (its process
    group is killed) and the conversation is free again at once.
    """
    if "text/event-stream" in (accept or ""):
        return streamed_command(body, ctx, services)
    cancellation = Cancellation()

    def work() -> RunCommandResult:
        with measured("runCommand"):
            return services.sandbox.run_command(
                ctx, body.command, body.timeoutSeconds, body.files, cancellation=cancellation
            )

    return await until_disconnected(request, work, cancellation)


@router.post("/writeFile")
def write_file(body: WriteFileArgs, ctx: ContextDep, services: ServicesDep) -> WriteFileResult:
    """Write UTF-8 text to a path inside ``/mnt/work``."""
    with measured("writeFile"):
        return services.sandbox.write_file(ctx, body.path, body.content)


@router.post("/readFile")
def read_file(body: ReadFileArgs, ctx: ContextDep, services: ServicesDep) -> ReadFileResult:
    """Read a workspace file: text as text, binary as base64, with truncation reported."""
    with measured("readFile"):
        return services.sandbox.read_file(ctx, body.path, body.maxBytes)


@router.post("/listFiles")
def list_files(body: ListFilesArgs, ctx: ContextDep, services: ServicesDep) -> ListFilesResult:
    """List one workspace folder (not recursive)."""
    with measured("listFiles"):
        return services.sandbox.list_files(ctx, body.path)


@router.post("/publishFiles")
def publish_files(
    body: PublishFilesArgs, ctx: ContextDep, services: ServicesDep
) -> PublishFilesResult:
    """Publish workspace files as conversation artifacts; failures are reported per path."""
    with measured("publishFiles"):
        return services.sandbox.publish_files(ctx, body.paths)
