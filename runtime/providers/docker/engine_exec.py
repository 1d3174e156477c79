"""The fallback way into a sandbox: one engine exec per operation.

Used for sandboxes whose image has no agent (made before it existed). Slower
(the engine creates a process and attaches its streams each time) but needs
nothing in the image beyond coreutils ``timeout`` and ``siesta-fs``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.utils.socket import STDOUT, frames_iter

from runtime.core.errors import ProviderUnavailable
from runtime.core.output import HeadTailBuffer
from runtime.providers.base import WORKSPACE, ByteSink, ExecRequest, ExecResult
from runtime.providers.docker.errors import docker_errors

PID_FILE = "/run/siesta/exec.pid"
# Runs as `sh -c WRAPPER siesta-exec TIMEOUT GRACE COMMAND`. coreutils `timeout`
# puts itself in a new process group (its pid, which is this shell's pid after
# `exec`) and on expiry signals that whole group, so background children die
# too. The pid file lets the host kill the group if the in-sandbox timer fails.
# Operations on a conversation never overlap (the lease), so a previous command
# whose `timeout` leader still runs was orphaned by a service instance that died
# or lost its lease: it is killed before the new command starts. (Background
# processes of a command that finished normally have no live leader: they stay.)
EXEC_WRAPPER = (
    f"mkdir -p /run/siesta; "
    f"if [ -f {PID_FILE} ] && read old < {PID_FILE} && "
    '[ "$(cat /proc/$old/comm 2>/dev/null)" = timeout ]; then kill -s KILL -- "-$old"; fi; '
    f"echo $$ > {PID_FILE} && "
    'exec timeout -k "$2" "$1" bash -lc "$3"'
)
TIMEOUT_EXIT_CODES = frozenset({124, 137})
# How long past timeout + grace the host waits before it intervenes itself.
HOST_WATCHDOG_SLACK_SECONDS = 5.0


class EngineExec:
    def __init__(self, api: docker.APIClient) -> None:
        self._api = api

    def run_command(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        argv = [
            "/bin/sh",
            "-c",
            EXEC_WRAPPER,
            "siesta-exec",
            str(request.timeout_seconds),
            str(request.kill_grace_seconds),
            request.command,
        ]
        stdout = HeadTailBuffer(request.max_output_bytes)
        stderr = HeadTailBuffer(request.max_output_bytes)
        started = time.monotonic()
        with docker_errors():
            exec_id = self._api.exec_create(
                sandbox_id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                workdir=WORKSPACE,
                environment=request.environment or None,
            )["Id"]
            stream = self._api.exec_start(exec_id, stream=True, demux=True)
            watchdog = _Watchdog(
                request.timeout_seconds + request.kill_grace_seconds + HOST_WATCHDOG_SLACK_SECONDS,
                lambda: self.kill_command_group(sandbox_id),
                stream.close,
            )
            try:
                for out, err in stream:
                    if out:
                        stdout.write(out)
                    if err:
                        stderr.write(err)
            finally:
                watchdog.cancel()
                stream.close()
            exit_code = self._wait_exit_code(exec_id)
        duration_ms = int((time.monotonic() - started) * 1000)
        timed_out = watchdog.fired or (
            exit_code in TIMEOUT_EXIT_CODES and duration_ms >= request.timeout_seconds * 1000
        )
        return ExecResult(exit_code, stdout.result(), stderr.result(), timed_out, duration_ms)

    def run_helper(
        self,
        sandbox_id: str,
        argv: list[str],
        *,
        stdin_chunks: Iterable[bytes] | None = None,
        stdout_sink: ByteSink | None = None,
    ) -> tuple[int, str]:
        """Run a helper with its stdin fed from ``stdin_chunks``; stdout goes to the sink.

        Returns the exit code and stderr (helpers print little there).
        """
        stderr = HeadTailBuffer(16 * 1024)
        with docker_errors():
            exec_id = self._api.exec_create(
                sandbox_id,
                argv,
                stdin=stdin_chunks is not None,
                stdout=True,
                stderr=True,
                workdir=WORKSPACE,
            )["Id"]
            stream = self._api.exec_start(exec_id, socket=True)
            raw = getattr(stream, "_sock", None)
            if not isinstance(raw, socket.socket):
                stream.close()
                msg = "file transfer needs a unix or tcp connection to the Docker engine"
                raise ProviderUnavailable(msg)
            try:
                if stdin_chunks is not None:
                    _send_all(raw, stdin_chunks)
                frames = frames_iter(stream, tty=False)  # type: ignore[no-untyped-call]
                for stream_id, data in frames:
                    if stream_id == STDOUT:
                        if stdout_sink is not None:
                            stdout_sink(data)
                    else:
                        stderr.write(data)
            finally:
                stream.close()
                raw.close()
            return self._wait_exit_code(exec_id), stderr.result().text

    def _wait_exit_code(self, exec_id: str) -> int:
        # The output stream can close a moment before the engine records the exit.
        deadline = time.monotonic() + 5.0
        while True:
            info = self._api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return int(info["ExitCode"])
            if time.monotonic() > deadline:
                return -1
            time.sleep(0.005)

    def kill_command_group(self, sandbox_id: str) -> None:
        with contextlib.suppress(
            docker.errors.DockerException, requests.exceptions.RequestException
        ):
            self._api.exec_start(
                self._api.exec_create(
                    sandbox_id,
                    ["/bin/sh", "-c", f'kill -s KILL -- "-$(cat {PID_FILE})"'],
                    stdout=False,
                    stderr=False,
                )["Id"],
                detach=True,
            )


def _send_all(raw: socket.socket, chunks: Iterable[bytes]) -> None:
    try:
        for chunk in chunks:
            raw.sendall(chunk)
        raw.shutdown(socket.SHUT_WR)  # end of stdin for the helper
    except (BrokenPipeError, ConnectionResetError):
        pass  # the helper stopped reading (a limit); its status line says why


class _Watchdog:
    """Host-side safety net for a command whose in-sandbox timeout failed.

    First kills the command's process group from outside; if the output stream
    is still open a few seconds later (a child escaped into a new session and
    holds the pipe), closes the stream so the call returns.
    """

    def __init__(self, after_seconds: float, kill: Any, close: Any) -> None:
        self.fired = False
        self._kill = kill
        self._close = close
        self._done = threading.Event()
        self._timer = threading.Timer(after_seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._kill()
        if not self._done.wait(HOST_WATCHDOG_SLACK_SECONDS):
            self._close()

    def cancel(self) -> None:
        self._done.set()
        self._timer.cancel()
