"""envd's ``process.Process`` over Connect: start, connect, list, input, signals.

The processes themselves are ``runtime.sandbox.processes``; this module turns their
events into envd's messages. A stream sends ``start`` at once (the SDKs wait for
it before anything else), then output, then ``end``; a quiet stream sends a
keepalive every ``Keepalive-Ping-Interval`` seconds (so proxies keep it open and
a gone client is noticed). Ending a stream never ends its process: that takes a
signal, its timeout (``Connect-Timeout-Ms`` of the Start call) or the sandbox's end.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from typing import Literal

from anyio import to_thread
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import Headers, RequestContext
from protobuf import Oneof

from api.e2b.envd import CALL
from api.e2b.protocol.process.process_connect import Process
from api.e2b.protocol.process.process_pb import (
    CloseStdinRequest,
    CloseStdinResponse,
    ConnectRequest,
    ConnectResponse,
    ListRequest,
    ListResponse,
    ProcessConfig,
    ProcessEvent,
    ProcessInfo,
    ProcessInput,
    ProcessSelector,
    SendInputRequest,
    SendInputResponse,
    SendSignalRequest,
    SendSignalResponse,
    Signal,
    StartRequest,
    StartResponse,
    StreamInputRequest,
    StreamInputResponse,
    UpdateRequest,
    UpdateResponse,
)
from api.e2b.rpc import connect_error, in_thread
from runtime.core.errors import SiestaError
from runtime.e2b.sandboxes import E2bSandboxes
from runtime.sandbox import processes
from runtime.services import Services

SIGNALS = {Signal.SIGKILL: signal.SIGKILL, Signal.SIGTERM: signal.SIGTERM}
Event = processes.ProcessEvent


def start_event(pid: int) -> ProcessEvent:
    event: Oneof[Literal["start"], ProcessEvent.StartEvent] = Oneof(
        "start", ProcessEvent.StartEvent(pid=pid)
    )
    return ProcessEvent(event=event)


def data_event(stream: str, data: bytes) -> ProcessEvent:
    if stream == "stderr":
        stderr: Oneof[Literal["stderr"], bytes] = Oneof("stderr", data)
        chunk = ProcessEvent.DataEvent(output=stderr)
    elif stream == "pty":
        pty: Oneof[Literal["pty"], bytes] = Oneof("pty", data)
        chunk = ProcessEvent.DataEvent(output=pty)
    else:
        stdout: Oneof[Literal["stdout"], bytes] = Oneof("stdout", data)
        chunk = ProcessEvent.DataEvent(output=stdout)
    event: Oneof[Literal["data"], ProcessEvent.DataEvent] = Oneof("data", chunk)
    return ProcessEvent(event=event)


def end_event(ended: processes.Ended) -> ProcessEvent:
    end = ProcessEvent.EndEvent(
        exit_code=ended.exit_code, exited=ended.exited, status=ended.status, error=ended.error
    )
    event: Oneof[Literal["end"], ProcessEvent.EndEvent] = Oneof("end", end)
    return ProcessEvent(event=event)


def keepalive_event() -> ProcessEvent:
    event: Oneof[Literal["keepalive"], ProcessEvent.KeepAlive] = Oneof(
        "keepalive", ProcessEvent.KeepAlive()
    )
    return ProcessEvent(event=event)


class ProcessService(Process):
    def __init__(self, services: Callable[[], Services]) -> None:
        """``services``: the running service's (built after the app, in its lifespan)."""
        self._get_services = services

    @property
    def _services(self) -> Services:
        return self._get_services()

    @property
    def _table(self) -> processes.SandboxProcesses:
        return self._services.processes

    def _keepalive(self, headers: Headers) -> float:
        given = headers.get("keepalive-ping-interval", "")
        try:
            return max(1.0, float(given))
        except ValueError:
            return self._services.settings.e2b.keepalive_seconds

    def _reader(self) -> processes.Reader:
        limit = self._services.settings.processes.reader_buffer_bytes
        return processes.Reader(asyncio.get_running_loop(), limit)

    async def _found(self, selector: ProcessSelector | None) -> processes.Process:
        """``_find`` off the event loop: a process another instance started is asked of
        the sandbox's agent."""
        return await to_thread.run_sync(self._find, selector)

    def _find(self, selector: ProcessSelector | None) -> processes.Process:
        call = CALL.get()
        chosen = selector.selector if selector is not None else None
        try:
            if chosen is not None and chosen.field == "pid":
                return self._table.find(E2bSandboxes.context(call.sandbox), pid=int(chosen.value))
            if chosen is not None and chosen.field == "tag":
                return self._table.find(E2bSandboxes.context(call.sandbox), tag=str(chosen.value))
        except SiestaError as exc:
            raise connect_error(exc) from exc
        raise ConnectError(Code.INVALID_ARGUMENT, "name the process by pid or tag")

    async def _events(
        self, process: processes.Process | None, reader: processes.Reader, keepalive: float
    ) -> AsyncIterator[ProcessEvent]:
        try:
            while True:
                event = await reader.next(keepalive)
                if event is None:
                    yield keepalive_event()
                elif isinstance(event, processes.Started):
                    yield start_event(event.pid)
                elif isinstance(event, processes.Output):
                    yield data_event(event.stream, event.data)
                elif isinstance(event, processes.Ended) and event.status == processes.LOST:
                    # Not an end: the sandbox went (or its channel broke) under the
                    # stream. envd says so with UNAVAILABLE; the SDK then asks /health,
                    # which tells a killed sandbox from a lost connection.
                    msg = (
                        "the connection to the sandbox ended before the stream completed: "
                        f"{event.error}"
                    )
                    raise ConnectError(Code.UNAVAILABLE, msg)
                elif isinstance(event, processes.Ended) and event.error == processes.TIMED_OUT:
                    # envd fails a Start past its Connect-Timeout-Ms with DEADLINE_EXCEEDED
                    # (the SDKs raise TimeoutException), not with an end.
                    raise ConnectError(Code.DEADLINE_EXCEEDED, "the command's timeout passed")
                elif isinstance(event, processes.Ended):
                    yield end_event(event)
                    return
                else:
                    raise ConnectError(Code.RESOURCE_EXHAUSTED, event.reason)
        finally:
            if process is not None:
                process.unsubscribe(reader)

    async def start(
        self, request: StartRequest, ctx: RequestContext[StartRequest, StartResponse]
    ) -> AsyncIterator[StartResponse]:
        call = CALL.get()
        size = request.pty.size if request.pty is not None else None
        pty = (size.cols or 80, size.rows or 24) if size is not None else None
        if request.pty is not None and pty is None:
            pty = (80, 24)
        given = request.process or ProcessConfig()
        if not given.cmd:
            raise ConnectError(Code.INVALID_ARGUMENT, "process.cmd is required")
        config = processes.ProcessConfig(
            cmd=given.cmd,
            args=list(given.args),
            envs=dict(given.envs),
            cwd=given.cwd if given.has_field("cwd") and given.cwd else None,
        )
        reader = self._reader()
        timeout_ms = ctx.timeout_ms
        shown = {
            "cmd": config.cmd,
            "args": config.args,
            "cwd": config.cwd,
            "user": call.user,
            "env": sorted(config.envs),  # names only: values may be secrets
        }
        process = await in_thread(
            lambda: call.at_door(
                self._services,
                "startProcess",
                shown,
                lambda: self._table.start(
                    E2bSandboxes.context(call.sandbox),
                    config,
                    user=call.user,
                    env_vars=call.sandbox.env_vars,
                    tag=request.tag if request.has_field("tag") else None,
                    # Missing means true: SDKs before envd 0.3.0 never sent it.
                    stdin=request.stdin if request.has_field("stdin") else True,
                    pty=pty,
                    timeout_ms=int(timeout_ms) if timeout_ms else None,
                    first_reader=reader,
                ),
            )
        )
        async for event in self._events(process, reader, self._keepalive(ctx.request_headers)):
            yield StartResponse(event=event)

    async def connect(
        self, request: ConnectRequest, ctx: RequestContext[ConnectRequest, ConnectResponse]
    ) -> AsyncIterator[ConnectResponse]:
        process = await self._found(request.process)
        reader = process.subscribe(self._reader())
        async for event in self._events(process, reader, self._keepalive(ctx.request_headers)):
            yield ConnectResponse(event=event)

    async def list(
        self, request: ListRequest, ctx: RequestContext[ListRequest, ListResponse]
    ) -> ListResponse:
        context = E2bSandboxes.context(CALL.get().sandbox)
        running = await to_thread.run_sync(self._table.running, context)
        return ListResponse(
            processes=[
                ProcessInfo(
                    config=ProcessConfig(
                        cmd=p.config.cmd,
                        args=p.config.args,
                        envs=p.config.envs,
                        cwd=p.config.cwd,
                    ),
                    pid=p.pid,
                    tag=p.tag,
                )
                for p in running
            ]
        )

    async def send_input(
        self, request: SendInputRequest, ctx: RequestContext[SendInputRequest, SendInputResponse]
    ) -> SendInputResponse:
        await self._write(await self._found(request.process), request.input)
        return SendInputResponse()

    async def _write(self, process: processes.Process, given: ProcessInput | None) -> None:
        chosen = given.input if given is not None else None
        if chosen is None:
            return
        if (chosen.field == "pty") != process.terminal:
            what = "a terminal's" if process.terminal else "stdin"
            msg = f"this process takes {what} input only"
            raise ConnectError(Code.INVALID_ARGUMENT, msg)
        if not process.stdin:
            raise ConnectError(
                Code.FAILED_PRECONDITION, "stdin not enabled or closed for this process"
            )
        data = bytes(chosen.value)
        shown = {"pid": process.pid, "bytes": len(data)}
        call = CALL.get()
        await in_thread(
            lambda: call.at_door(
                self._services,
                "writeProcessInput",
                shown,
                lambda: process.handle.write(data),
                data,
            )
        )

    async def stream_input(
        self,
        request: AsyncIterator[StreamInputRequest],
        ctx: RequestContext[StreamInputRequest, StreamInputResponse],
    ) -> StreamInputResponse:
        process: processes.Process | None = None
        async for message in request:
            chosen = message.event
            if chosen is None or chosen.field == "keepalive":
                continue
            if chosen.field == "start":
                process = await self._found(chosen.value.process)
            elif process is None:
                raise ConnectError(Code.INVALID_ARGUMENT, "the first message must be start")
            else:
                await self._write(process, chosen.value.input)
        return StreamInputResponse()

    async def send_signal(
        self,
        request: SendSignalRequest,
        ctx: RequestContext[SendSignalRequest, SendSignalResponse],
    ) -> SendSignalResponse:
        process = await self._found(request.process)
        signo = SIGNALS.get(request.signal)
        if signo is None:
            raise ConnectError(Code.INVALID_ARGUMENT, f"unknown signal {request.signal}")
        shown = {"pid": process.pid, "signal": request.signal}
        await in_thread(
            lambda: CALL.get().at_door(
                self._services,
                "stopProcess",
                shown,
                lambda: self._table.signal(process, signo),
            )
        )
        return SendSignalResponse()

    async def update(
        self, request: UpdateRequest, ctx: RequestContext[UpdateRequest, UpdateResponse]
    ) -> UpdateResponse:
        process = await self._found(request.process)
        size = request.pty.size if request.pty is not None else None
        if size is None:
            return UpdateResponse()
        if not process.terminal:
            raise ConnectError(Code.INVALID_ARGUMENT, "this process has no terminal to resize")
        await in_thread(lambda: process.handle.resize(size.cols, size.rows))
        return UpdateResponse()

    async def close_stdin(
        self, request: CloseStdinRequest, ctx: RequestContext[CloseStdinRequest, CloseStdinResponse]
    ) -> CloseStdinResponse:
        process = await self._found(request.process)
        if process.terminal:
            msg = "a terminal's input cannot be closed: send Ctrl-D (0x04) instead"
            raise ConnectError(Code.INVALID_ARGUMENT, msg)
        if process.stdin:
            process.stdin = False
            await in_thread(process.handle.close_input)
        return CloseStdinResponse()
