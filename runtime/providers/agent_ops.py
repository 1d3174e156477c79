"""The provider operations, done through a sandbox's agent channel.

Provider-independent: Docker and Kubernetes open the channel their own way and
then run commands and file helpers through these two functions.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.output import HeadTailBuffer, captured
from runtime.providers.agent_channel import AgentChannel
from runtime.providers.agent_protocol import SpawnFlag
from runtime.providers.base import ByteSink, ExecRequest, ExecResult

BASH = "bash"  # found on PATH, and what $0 says (as it always said)
HOST_SLACK_SECONDS = 10.0
"""How long past the command's timeout and grace this side waits on its own."""
STREAM_NAMES = {1: "stdout", 2: "stderr"}
HELPER_STDERR_BYTES = 16 * 1024


def run_command(channel: AgentChannel, request: ExecRequest) -> ExecResult:
    """``bash -lc`` in the workspace: the agent enforces the timeout (killing the
    process group) and keeps head and tail of each stream inside the sandbox.

    Any command still running from an earlier holder of the conversation (an
    instance that died or lost its lease) is killed first: the lease guarantees
    that nothing legitimate runs alongside this one.
    """
    listener = request.on_output
    flags = SpawnFlag.KILL_RUNNING | (SpawnFlag.STREAM if listener else SpawnFlag(0))
    timeout_ms = request.timeout_seconds * 1000
    grace_ms = request.kill_grace_seconds * 1000
    try:
        outcome = channel.spawn(
            [BASH, "-lc", request.command],
            timeout_ms=timeout_ms,
            grace_ms=grace_ms,
            cap_bytes=request.max_output_bytes,
            flags=flags,
            on_output=(lambda stream, chunk: listener(STREAM_NAMES.get(stream, "stderr"), chunk))
            if listener
            else None,
            wait_seconds=request.timeout_seconds + request.kill_grace_seconds + HOST_SLACK_SECONDS,
        )
    except TimeoutError:
        # The agent did not end it in time (it is frozen, or the engine lost the
        # stream's end): kill it from here and say it timed out.
        channel.cancel()
        empty = captured(b"", b"", 0)
        return ExecResult(137, empty, empty, timed_out=True, duration_ms=timeout_ms + grace_ms)
    return ExecResult(
        exit_code=outcome.exit_code,
        stdout=captured(outcome.stdout.head, outcome.stdout.tail, outcome.stdout.total_bytes),
        stderr=captured(outcome.stderr.head, outcome.stderr.tail, outcome.stderr.total_bytes),
        timed_out=outcome.timed_out,
        duration_ms=outcome.duration_ms,
    )


def run_helper(
    channel: AgentChannel,
    argv: list[str],
    *,
    stdin_chunks: Iterable[bytes] | None = None,
    stdout_sink: ByteSink | None = None,
) -> tuple[int, str]:
    """A file helper (``siesta-fs``) with its stdin streamed in and its stdout out;
    returns the exit code and stderr (helpers print one status line there)."""
    stderr = HeadTailBuffer(HELPER_STDERR_BYTES)

    def output(stream: int, chunk: bytes) -> None:
        if stream == 1:
            if stdout_sink is not None:
                stdout_sink(chunk)
        else:
            stderr.write(chunk)

    outcome = channel.spawn(argv, stdin=stdin_chunks, on_output=output)
    return outcome.exit_code, stderr.result().text
