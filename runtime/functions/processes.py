"""The process functions, MCP tools of the System Tool ``sandbox`` beside the catalog's
five (models: ``siesta_contract.functions.processes``)."""

from __future__ import annotations

from siesta_contract.functions.processes import (
    ReadProcessArgs,
    StartProcessFunctionArgs,
    StopProcessArgs,
    WriteProcessInputArgs,
)
from siesta_contract.processes import ProcessPublic

from runtime.functions.base import FunctionSpec

START_PROCESS = FunctionSpec(
    "startProcess",
    "Start a background process (a server, a watcher, a REPL) with bash -lc in the "
    "workspace /mnt/work; it keeps running after this call, until it ends, is stopped, "
    "times out or the sandbox ends. Returns its pid: read it with readProcess.",
    StartProcessFunctionArgs,
    ProcessPublic,
)
READ_PROCESS = FunctionSpec(
    "readProcess",
    "Whether a process started with startProcess still runs, how it ended (exitCode, "
    "status), and the last 64 KiB of its stdout and stderr. waitSeconds: wait for it "
    "to end first, up to that long.",
    ReadProcessArgs,
    ProcessPublic,
)
WRITE_PROCESS_INPUT = FunctionSpec(
    "writeProcessInput",
    "Write text to the stdin of a process started with stdin: true; eof closes its stdin "
    "(a program reading to the end then finishes).",
    WriteProcessInputArgs,
    ProcessPublic,
)
STOP_PROCESS = FunctionSpec(
    "stopProcess",
    "Send a signal (default SIGTERM; SIGKILL ends it at once) to a process and its "
    "children; returns its state, ended when it ended within a few seconds.",
    StopProcessArgs,
    ProcessPublic,
)
PROCESSES = [START_PROCESS, READ_PROCESS, WRITE_PROCESS_INPUT, STOP_PROCESS]
