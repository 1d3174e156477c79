"""Processes of their own over the agent channel (``SandboxInside.start_process``).

A detached SPAWN (protocol 2) outlives the call that starts it: the handle
feeds, signals and waits for it, and every failure of the channel reads as the
runtime's ``SandboxUnavailable``, as commands have it.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent import ops
from runtime.providers.agent.channel import (
    AgentChannel,
    ChannelClosed,
    SpawnFailed,
    StartedRequest,
)
from runtime.providers.base import ExecResult, OutputListener, ProcessSpec

STREAMS = {1: "stdout", 2: "stderr"}


def start(channel: AgentChannel, spec: ProcessSpec) -> AgentProcess:
    try:
        started = channel.start(
            spec.argv,
            timeout_ms=spec.timeout_seconds * 1000,
            grace_ms=spec.kill_grace_seconds * 1000,
            cap_bytes=spec.max_output_bytes,
            stdin=spec.stdin,
            pty=spec.pty,
            kept=(spec.ring_bytes, spec.tag) if channel.private else None,
        )
    except SpawnFailed as exc:
        if exc.errno == errno.EINVAL and "flags" in str(exc):
            msg = (
                "this sandbox's agent is older than processes (protocol 1); "
                "the sandbox runs commands, but a new one is needed for processes"
            )
            raise SandboxUnavailable(msg) from exc
        msg = f"the process could not start: {exc}"
        raise SandboxUnavailable(msg) from exc
    except ChannelClosed as exc:
        msg = f"the connection to the sandbox ended while starting a process; try again ({exc})"
        raise SandboxUnavailable(msg) from exc
    return AgentProcess(started, terminal=spec.pty is not None)


class AgentProcess:
    """``RunningProcess`` over a detached agent request."""

    def __init__(self, started: StartedRequest, *, terminal: bool = False) -> None:
        self._started = started
        self._streams = {1: "pty", 2: "pty"} if terminal else STREAMS

    @property
    def pid(self) -> int:
        return self._started.pid

    def write(self, data: bytes) -> None:
        with _unavailable("sending input"):
            self._started.write(data)

    def close_input(self) -> None:
        with _unavailable("closing input"):
            self._started.close_input()

    def signal(self, signo: int) -> None:
        with _unavailable("sending a signal"):
            self._started.signal(signo)

    def kill(self) -> None:
        self._started.kill()  # a closed channel: the process ends with its sandbox

    def close(self) -> None:
        self._started.close()

    def resize(self, columns: int, rows: int) -> None:
        with _unavailable("resizing a terminal"):
            self._started.resize(columns, rows)

    def wait(self, on_output: OutputListener) -> ExecResult:
        def output(stream: int, chunk: bytes) -> None:
            on_output(self._streams[stream], chunk)

        with _unavailable("the process"):
            return ops.exit_result(self._started.wait(output))


@contextlib.contextmanager
def _unavailable(during: str) -> Iterator[None]:
    try:
        yield
    except ChannelClosed as exc:
        msg = f"the connection to the sandbox ended during {during} ({exc})"
        raise SandboxUnavailable(msg) from exc
