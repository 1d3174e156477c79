"""A conversation's background processes as ``/v1`` and the MCP tools offer them: a
shell command started in the workspace, seen as ``ProcessPublic``, given input,
signalled by name. (E2B's commands use ``processes`` directly, in E2B's terms.)"""

from __future__ import annotations

import signal

from siesta_contract.processes import ProcessPublic

from runtime.core.errors import InvalidRequest
from runtime.sandbox.processes import Process, ProcessConfig
from runtime.seams.providers import WORKSPACE

SIGNALS = {
    "SIGTERM": signal.SIGTERM,
    "SIGKILL": signal.SIGKILL,
    "SIGINT": signal.SIGINT,
    "SIGHUP": signal.SIGHUP,
}


class StdinClosed(InvalidRequest):
    code = "stdin_closed"


def shell_config(command: str, cwd: str | None, env: dict[str, str] | None) -> ProcessConfig:
    """``bash -lc command``, in ``cwd`` (default the workspace)."""
    return ProcessConfig(
        cmd="/bin/bash", args=["-l", "-c", command], envs=env or {}, cwd=cwd or WORKSPACE
    )


def public(process: Process) -> ProcessPublic:
    ended = process.ended
    return ProcessPublic(
        pid=process.pid,
        tag=process.tag,
        command=process.config.args[-1] if process.config.args else process.config.cmd,
        cwd=process.config.cwd,
        running=ended is None,
        exitCode=ended.exit_code if ended is not None and ended.exited else None,
        status=ended.status if ended is not None else None,
        recent=process.recent(),
    )


def write_input(process: Process, data: bytes, *, eof: bool) -> None:
    """Write ``data`` to its stdin, then close it if ``eof`` (blocks: a worker thread's)."""
    if not process.stdin:
        msg = f"process {process.pid} does not read input (started without stdin, or it was closed)"
        raise StdinClosed(msg, pid=process.pid)
    if data:
        process.handle.write(data)
    if eof:
        process.stdin = False
        process.handle.close_input()
