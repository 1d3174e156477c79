"""A conversation's processes that keep running after the call that starts them.

A server, a watcher or a REPL is started here and goes on in the sandbox; its
recent output and how it ended can be read at any time, its live output streamed
(``Accept: text/event-stream``), its stdin written, its process group signalled.
The same processes as E2B's (``runtime.sandbox.processes``): they end at their
timeout, a signal or the sandbox's end. The table is this instance's: with several
instances, a conversation's process calls go to the one that started them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import StreamingResponse

from siesta_contract.processes import (
    ProcessInputArgs,
    ProcessList,
    ProcessPublic,
    ProcessSignalArgs,
    StartProcessArgs,
)
from siesta_contract.text import WORKSPACE

from api.deps import CallerDep, ContextDep, ServicesDep, requires, through_door
from api.responses import SANDBOX, error_responses
from api.streaming import SSE_CONTENT
from runtime.sandbox import processes
from runtime.sandbox.background import SIGNALS, StdinClosed, public
from runtime.services import Services

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox/processes",
    tags=["processes"],
    dependencies=requires("shell"),
    responses=error_responses(*SANDBOX),
)
Pid = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.post("", status_code=201, response_model=ProcessPublic)
async def start_process(
    body: StartProcessArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> ProcessPublic:
    """Start ``bash -lc command`` and answer once it runs; it goes on after this call.
    It is ``startProcess`` at the door: it also obeys ``runCommand``'s policy."""
    config = processes.ProcessConfig(
        cmd="/bin/bash",
        args=["-l", "-c", body.command],
        envs=body.env or {},
        cwd=body.cwd or WORKSPACE,
    )
    shown = {
        "command": body.command,
        "cwd": config.cwd,
        "user": body.user or "root",
        "env": sorted(config.envs),  # names only: values may be secrets
    }

    def start() -> processes.Process:
        with through_door(services, ctx, caller.name, "startProcess", shown) as entry:
            process = services.processes.start(
                ctx,
                config,
                user=body.user or "root",
                tag=body.tag,
                stdin=body.stdin,
                timeout_ms=body.timeoutSeconds * 1000 if body.timeoutSeconds else None,
            )
            entry.result = {"pid": process.pid}
        return process

    return public(await to_thread.run_sync(start))


@router.get("", response_model=ProcessList)
def list_processes(ctx: ContextDep, services: ServicesDep) -> ProcessList:
    """Running processes, then the last ones that ended."""
    return ProcessList(processes=[public(p) for p in services.processes.listed(ctx)])


@router.get(
    "/{pid}",
    response_model=ProcessPublic,
    responses={
        200: {
            "description": "The process. With `Accept: text/event-stream`: its live output "
            'from now on as `output` events (`{"stream": "stdout" | "stderr", "text"}`), '
            "then one `end` event with this body.",
            "content": SSE_CONTENT,
        }
    },
)
async def get_process(
    pid: Pid, ctx: ContextDep, services: ServicesDep, request: Request
) -> ProcessPublic | StreamingResponse:
    """Whether it runs, how it ended, and what it printed last."""
    process = await to_thread.run_sync(services.processes.get, ctx, pid)
    if "text/event-stream" not in request.headers.get("accept", ""):
        return public(process)
    return StreamingResponse(_events(services, process), media_type="text/event-stream")


async def _events(services: Services, process: processes.Process) -> AsyncIterator[str]:
    reader = processes.Reader(
        asyncio.get_running_loop(), services.settings.processes.reader_buffer_bytes
    )
    process.subscribe(reader)
    keepalive = services.settings.http.sse_keepalive_seconds
    try:
        while True:
            event = await reader.next(keepalive)
            if event is None:
                yield ": keepalive\n\n"
            elif isinstance(event, processes.Output):
                text = event.data.decode("utf-8", errors="replace")
                yield _sse("output", {"stream": event.stream, "text": text})
            elif isinstance(event, processes.Ended | processes.Dropped):
                yield _sse("end", public(process).model_dump(mode="json"))
                return
    finally:
        process.unsubscribe(reader)


def _sse(name: str, data: object) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


@router.post("/{pid}/input", status_code=204, response_class=Response)
async def write_input(
    pid: Pid, body: ProcessInputArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> Response:
    """Write text to its stdin (started with ``stdin: true``); ``eof`` closes it."""
    process = await to_thread.run_sync(lambda: services.processes.find(ctx, pid=pid))
    if not process.stdin:
        msg = f"process {pid} does not read input (started without stdin, or it was closed)"
        raise StdinClosed(msg, pid=pid)
    data = body.data.encode()
    shown = {"pid": pid, "bytes": len(data), "eof": body.eof}

    def write() -> None:
        with through_door(services, ctx, caller.name, "writeProcessInput", shown, data):
            if data:
                process.handle.write(data)
            if body.eof:
                process.stdin = False
                process.handle.close_input()

    await to_thread.run_sync(write)
    return Response(status_code=204)


@router.post("/{pid}/signal", status_code=204, response_class=Response)
async def send_signal(
    pid: Pid, body: ProcessSignalArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> Response:
    """Send a signal to its whole process group (``SIGKILL`` ends it at once)."""
    process = await to_thread.run_sync(lambda: services.processes.find(ctx, pid=pid))
    shown = {"pid": pid, "signal": body.signal}

    def signal() -> None:
        with through_door(services, ctx, caller.name, "stopProcess", shown):
            services.processes.signal(process, SIGNALS[body.signal])

    await to_thread.run_sync(signal)
    return Response(status_code=204)
