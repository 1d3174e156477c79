"""A terminal in a conversation's sandbox over a WebSocket.

``GET /v1/conversations/{id}/sandbox/terminal`` (upgraded to a WebSocket; the same
bearer token and ``X-Siesta-*`` headers as every conversation route) starts an
interactive login shell in a real terminal (``cols`` by ``rows``), or with ``pid``
attaches to a terminal started earlier and shows its last screenful again.

Frames, both ways:
- binary: the terminal's bytes (from the service: what it prints; to it: keys);
- text, JSON: from the client ``{"type": "resize", "cols", "rows"}``,
  ``{"type": "input", "data"}`` (text as keys), ``{"type": "signal", "signal"}``
  and ``{"type": "detach"}``; from the service ``{"type": "started", "pid"}`` first
  and ``{"type": "exit", "exitCode", "status"}`` last, then the socket closes.

Closing the socket hangs the terminal up (SIGHUP, as closing a terminal window
does) unless the client detached first: then it runs on, listed among the
conversation's processes, and ``?pid=`` attaches to it again. A refused
connection is answered before the upgrade with the error's status and body.

An instance that stops (SIGTERM) hands its terminals off (``api/drain.py``): it
sends ``{"type": "reconnect", "pid"}``, closes with 1012 (service restart) and leaves
the terminal running; the client attaches again with ``?pid=`` (any instance) and
gets its screen back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from siesta_contract.processes import ProcessUser
from siesta_contract.text import WORKSPACE

from api.deps import through_door, websocket_context
from api.errors import refuse_websocket
from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest, SiestaError
from runtime.sandbox import processes
from runtime.sandbox.background import SIGNALS
from runtime.services import Services

router = APIRouter(prefix="/v1/conversations/{conversation_id}/sandbox", tags=["terminal"])
SHELL = processes.ProcessConfig(cmd="/bin/bash", args=["-i", "-l"])
MAX_SIZE = 1000
"""The most columns or rows a terminal may have."""
RECONNECT_CLOSE_CODE = 1012
"""Service restart (RFC 6455's registry): this instance stops; attach again."""


class NotATerminal(InvalidRequest):
    code = "not_a_terminal"


@router.websocket("/terminal")
async def terminal(
    websocket: WebSocket,
    conversation_id: str,
    cols: Annotated[int, Query(ge=1, le=MAX_SIZE)] = 80,
    rows: Annotated[int, Query(ge=1, le=MAX_SIZE)] = 24,
    user: Annotated[ProcessUser | None, Query()] = None,
    cwd: Annotated[str | None, Query(min_length=1, max_length=4096)] = None,
    pid: Annotated[int | None, Query(ge=1)] = None,
) -> None:
    services: Services = websocket.app.state.services
    try:
        # Off the event loop: a registered agent's configuration is read from the store.
        caller, ctx = await to_thread.run_sync(
            websocket_context, websocket, conversation_id, "shell"
        )
        process = await to_thread.run_sync(
            lambda: _open(services, ctx, caller.name, pid, (cols, rows), user, cwd)
        )
    except SiestaError as error:
        await refuse_websocket(websocket, error, close_code=1008)
        return
    reader = processes.Reader(
        asyncio.get_running_loop(), services.settings.processes.reader_buffer_bytes
    )
    process.subscribe(reader, replay="pty")
    await websocket.accept()
    detached = handed_off = False
    keys = asyncio.create_task(_keys(websocket, services, process))
    handoff = asyncio.ensure_future(websocket.app.state.drain.handing_off())
    try:
        with contextlib.suppress(WebSocketDisconnect, OSError):  # the client is gone
            await _screen(websocket, services, process, reader, keys, handoff)
    finally:
        process.unsubscribe(reader)
        handed_off = handoff.done() and not handoff.cancelled()
        handoff.cancel()
        keys.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # a write that failed
            detached = await keys
        if not detached and not handed_off and process.ended is None:
            await to_thread.run_sync(lambda: services.processes.hang_up(process))


def _open(
    services: Services,
    ctx: CallContext,
    requested_by: str,
    pid: int | None,
    size: tuple[int, int],
    user: str | None,
    cwd: str | None,
) -> processes.Process:
    """A new terminal, or one started earlier: either is ``openTerminal`` at the door
    (and obeys ``runCommand``'s policy: a terminal runs any command). A held one is
    refused before the upgrade with the approval's id."""
    shown = {"pid": pid, "user": user or "root", "cwd": cwd or WORKSPACE}
    with through_door(services, ctx, requested_by, "openTerminal", shown) as entry:
        if pid is None:
            config = processes.ProcessConfig(
                SHELL.cmd, SHELL.args, {"TERM": "xterm-256color"}, cwd or WORKSPACE
            )
            process = services.processes.start(ctx, config, user=user or "root", pty=size)
        else:
            process = services.processes.find(ctx, pid=pid)
            if not process.terminal:
                msg = f"process {pid} runs without a terminal: read it at .../processes/{pid}"
                raise NotATerminal(msg, pid=pid)
            process.handle.resize(*size)
        entry.result = {"pid": process.pid}
    return process


async def _screen(
    websocket: WebSocket,
    services: Services,
    process: processes.Process,
    reader: processes.Reader,
    keys: asyncio.Task[bool],
    handoff: asyncio.Future[None],
) -> None:
    """The terminal's events to the socket until it ends, the client goes or this
    instance drains (the terminal is handed off: it runs on, the client reattaches)."""
    keepalive = services.settings.http.sse_keepalive_seconds
    while not keys.done():
        next_event = asyncio.ensure_future(reader.next(keepalive))
        waits: set[asyncio.Future[Any]] = {next_event, keys, handoff}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if handoff.done():
            next_event.cancel()
            await websocket.send_json({"type": "reconnect", "pid": process.pid})
            await websocket.close(RECONNECT_CLOSE_CODE)
            return
        if not next_event.done():
            next_event.cancel()
            return  # the client went away, or detached
        event = next_event.result()
        if isinstance(event, processes.Started):
            await websocket.send_json({"type": "started", "pid": event.pid})
        elif isinstance(event, processes.Output):
            await websocket.send_bytes(event.data)
        elif isinstance(event, processes.Ended | processes.Dropped):
            ended = process.ended
            await websocket.send_json(
                {
                    "type": "exit",
                    "exitCode": ended.exit_code if ended is not None and ended.exited else None,
                    "status": ended.status if ended is not None else None,
                    "error": event.reason if isinstance(event, processes.Dropped) else None,
                }
            )
            if websocket.client_state is WebSocketState.CONNECTED:
                await websocket.close(1000)
            return


async def _keys(websocket: WebSocket, services: Services, process: processes.Process) -> bool:
    """The client's frames to the terminal until it closes (False) or detaches (True)."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return False
        keys: bytes | None = message.get("bytes")
        if keys:
            await to_thread.run_sync(process.handle.write, keys)
            continue
        try:
            control: Any = json.loads(message.get("text") or "null")
            kind = control["type"] if isinstance(control, dict) else None
        except (ValueError, KeyError):
            kind = None
        if kind == "detach":
            return True
        await _control(websocket, services, process, kind, control)


async def _control(
    websocket: WebSocket,
    services: Services,
    process: processes.Process,
    kind: object,
    control: Any,
) -> None:
    if kind == "input" and isinstance(control.get("data"), str):
        text: str = control["data"]
        await to_thread.run_sync(lambda: process.handle.write(text.encode()))
    elif kind == "resize" and _size(control.get("cols")) and _size(control.get("rows")):
        await to_thread.run_sync(lambda: process.handle.resize(control["cols"], control["rows"]))
    elif kind == "signal" and control.get("signal") in SIGNALS:
        signo = SIGNALS[control["signal"]]
        await to_thread.run_sync(lambda: services.processes.signal(process, signo))
    else:
        message = (
            'a text frame must be JSON: {"type": "resize", "cols", "rows"}, '
            '{"type": "input", "data"}, {"type": "signal", "signal": '
            + " | ".join(f'"{name}"' for name in SIGNALS)
            + '} or {"type": "detach"}'
        )
        await websocket.send_json({"type": "error", "code": "invalid_frame", "message": message})


def _size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SIZE
