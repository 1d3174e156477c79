"""A conversation's processes that keep running after the call that starts them.

A server, a watcher or a REPL is started here and goes on in the sandbox; its
recent output and how it ended can be read at any time, its live output streamed
(``Accept: text/event-stream``), its stdin written, its process group signalled.
The same processes as E2B's (``runtime.sandbox.processes``): they end at their
timeout, a signal or the sandbox's end. Their table is kept by the sandbox's agent, so
any instance serves any of these calls; an instance that stops hands its output
streams off (``api/drain.py``): they close without ``end``, and the client's
``Last-Event-ID`` reads on through another instance.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Iterator
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Path, Query, Request, Response
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
from api.drain import Drain
from api.responses import SANDBOX, error_responses
from api.streaming import SSE_CONTENT
from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest, SiestaError
from runtime.sandbox import processes
from runtime.sandbox.background import SIGNALS, StdinClosed, public
from runtime.seams.providers import OutputAt, OutputEnded, OutputEvent, OutputLost
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
            'from now on as `output` events (`{"stream": "stdout" | "stderr", "text"}`; '
            "each with an `id`, the offset its output has reached: `?from=` or "
            '`Last-Event-ID` reads on from it), a `gap` event (`{"lostBytes"}`) when '
            "output from that offset is no longer kept, then one `end` event with this "
            'body (or an `error` event, `{"code", "message"}`).',
            "content": SSE_CONTENT,
        }
    },
)
async def get_process(
    pid: Pid,
    ctx: ContextDep,
    services: ServicesDep,
    request: Request,
    start: Annotated[int | None, Query(alias="from", ge=0)] = None,
) -> ProcessPublic | StreamingResponse:
    """Whether it runs, how it ended, and what it printed last. Streamed, each
    ``output`` event's ``id`` is where the process's output stands after it: ``?from=``
    that offset (or ``Last-Event-ID``, which browsers' and SSE clients' reconnects send)
    reads on from there, through any instance, while the sandbox's agent keeps it (a
    ``gap`` event says how many bytes it no longer kept)."""
    process = await to_thread.run_sync(services.processes.get, ctx, pid)
    if "text/event-stream" not in request.headers.get("accept", ""):
        return public(process)
    resume = start if start is not None else _last_event_id(request)
    stop = threading.Event()
    positioned = await to_thread.run_sync(
        lambda: services.processes.output_from(ctx, pid, resume, stop)
    )
    if positioned is not None:
        drain: Drain = request.app.state.drain
        events = _positioned(services, ctx, pid, positioned, stop, drain)
        return StreamingResponse(events, media_type="text/event-stream")
    if resume is not None:
        msg = (
            "this sandbox's processes cannot be read from a position (its agent keeps no "
            "process table this instance can ask); read from now on, without from"
        )
        raise ResumeNotSupported(msg, pid=pid)
    return StreamingResponse(_events(services, process), media_type="text/event-stream")


class ResumeNotSupported(InvalidRequest):
    code = "resume_not_supported"


def _last_event_id(request: Request) -> int | None:
    value = request.headers.get("last-event-id", "").strip()
    if not value:
        return None
    if not value.isdigit():
        msg = f"Last-Event-ID is an output offset (digits), not {value[:40]!r}"
        raise InvalidRequest(msg)
    return int(value)


async def _positioned(
    services: Services,
    ctx: CallContext,
    pid: int,
    events: Iterator[OutputEvent],
    stop: threading.Event,
    drain: Drain,
) -> AsyncIterator[str]:
    """The agent's events as server-sent events, each output with its offset as ``id``,
    until the process ends or this instance drains (then the stream closes without
    ``end``: the client reads on elsewhere from its last ``id``)."""
    keepalive = services.settings.http.sse_keepalive_seconds
    queue: asyncio.Queue[OutputEvent | SiestaError | None] = asyncio.Queue(POSITIONED_QUEUE)
    pump = threading.Thread(
        target=_pump, args=(events, queue, asyncio.get_running_loop(), stop), daemon=True
    )
    pump.start()
    handoff = asyncio.ensure_future(drain.handing_off())
    try:
        while True:
            got = asyncio.ensure_future(queue.get())
            await asyncio.wait({got, handoff}, timeout=keepalive, return_when=FIRST_COMPLETED)
            if handoff.done():
                got.cancel()
                return  # whatever ``got`` held was not sent: the client resumes before it
            if not got.done():
                got.cancel()
                yield ": keepalive\n\n"
                continue
            event = got.result()
            if isinstance(event, OutputAt):
                text = event.data.decode("utf-8", errors="replace")
                data = json.dumps({"stream": event.stream, "text": text})
                yield f"id: {event.end}\nevent: output\ndata: {data}\n\n"
            elif isinstance(event, OutputLost):
                yield _sse("gap", {"lostBytes": event.lost_bytes})
            elif isinstance(event, SiestaError):
                yield _sse("error", {"code": event.code, "message": str(event)})
                return
            else:  # ended (or the stream did): how the process stands now
                process = await to_thread.run_sync(services.processes.get, ctx, pid)
                await to_thread.run_sync(process.wait_ended, END_WAIT_SECONDS)
                yield _sse("end", public(process).model_dump(mode="json"))
                return
    finally:
        handoff.cancel()
        stop.set()


POSITIONED_QUEUE = 64
"""Events waiting for a slow client; past it the agent's stream waits (its credit)."""
END_WAIT_SECONDS = 5.0
"""How long the ``end`` event waits for this instance to see the process's end."""


def _pump(
    events: Iterator[OutputEvent],
    queue: asyncio.Queue[OutputEvent | SiestaError | None],
    loop: asyncio.AbstractEventLoop,
    stop: threading.Event,
) -> None:
    """On its own thread: the agent's events into ``queue``, waiting while it is full,
    until they end or the reader has gone (``stop``)."""

    def put(item: OutputEvent | SiestaError | None) -> bool:
        while not stop.is_set():
            future = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
            try:
                future.result(timeout=1)
                return True
            except concurrent.futures.TimeoutError:
                future.cancel()
            except RuntimeError:  # the loop has closed
                return False
        return False

    try:
        for event in events:
            if not put(event):
                return
            if isinstance(event, OutputEnded):
                return
        put(None)
    except SiestaError as exc:
        put(exc)
    finally:
        with contextlib.suppress(Exception):
            close = getattr(events, "close", None)
            if close is not None:
                close()


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
