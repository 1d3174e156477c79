"""Adapters of the process functions, over the conversation's background processes
(the same ones, and the same rules, as the ``/v1`` process routes)."""

from __future__ import annotations

import time
from typing import Any

from siesta_contract.functions.processes import (
    ReadProcessArgs,
    StartProcessFunctionArgs,
    StopProcessArgs,
    WriteProcessInputArgs,
)

from runtime.core.cancellation import Cancellation
from runtime.functions.base import parse_arguments
from runtime.functions.processes import (
    READ_PROCESS,
    START_PROCESS,
    STOP_PROCESS,
    WRITE_PROCESS_INPUT,
)
from runtime.sandbox.background import SIGNALS, public, shell_config, write_input
from runtime.sandbox.processes import Process, SandboxProcesses
from runtime.tools.call import Adapter, ToolCall

STOP_WAIT_SECONDS = 5.0
"""How long ``stopProcess`` waits for the process to end before it answers."""
POLL_SECONDS = 0.1
"""How often a wait looks whether the process ended or its caller went away."""


def process_adapters(processes: SandboxProcesses) -> dict[str, Adapter]:
    def start_process(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(StartProcessFunctionArgs, START_PROCESS.name, arguments)
        process = processes.start(
            call.ctx,
            shell_config(a.command, a.cwd, a.env),
            user=a.user or "root",
            tag=a.tag,
            stdin=bool(a.stdin),
            timeout_ms=a.timeoutSeconds * 1000 if a.timeoutSeconds else None,
        )
        return _wire(process)

    def read_process(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(ReadProcessArgs, READ_PROCESS.name, arguments)
        process = processes.get(call.ctx, a.pid)
        if a.waitSeconds:
            _wait(process, a.waitSeconds, call.events.cancellation)
        return _wire(process)

    def write_process_input(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(WriteProcessInputArgs, WRITE_PROCESS_INPUT.name, arguments)
        process = processes.find(call.ctx, pid=a.pid)
        write_input(process, a.data.encode(), eof=bool(a.eof))
        return _wire(process)

    def stop_process(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(StopProcessArgs, STOP_PROCESS.name, arguments)
        process = processes.get(call.ctx, a.pid)
        if process.ended is None:  # one that ended already is answered as it is
            processes.signal(process, SIGNALS[a.signal or "SIGTERM"])
            _wait(process, STOP_WAIT_SECONDS, call.events.cancellation)
        return _wire(process)

    return {
        START_PROCESS.name: start_process,
        READ_PROCESS.name: read_process,
        WRITE_PROCESS_INPUT.name: write_process_input,
        STOP_PROCESS.name: stop_process,
    }


def _wait(process: Process, seconds: float, cancellation: Cancellation | None) -> None:
    """Until ``process`` ends, ``seconds`` pass or the caller goes away."""
    deadline = time.monotonic() + seconds
    while process.ended is None and not (cancellation is not None and cancellation.cancelled):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        process.wait_ended(min(left, POLL_SECONDS))  # at once when it ends


def _wire(process: Process) -> Any:
    return public(process).model_dump(mode="json")
