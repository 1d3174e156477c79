"""Commands and file helpers through a sandbox's agent channel, errors translated.

Provider-independent: ``inside.py`` puts them together as a ``SandboxInside``;
Docker's engine-exec fallback reuses the file operations with its own way of
running the helper (``HelperIO``).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterable

from runtime.core.errors import SandboxUnavailable, SiestaError
from runtime.core.output import HeadTailBuffer, captured
from runtime.providers.agent import fshelper
from runtime.providers.agent.channel import (
    AgentChannel,
    ChannelClosed,
    ChannelStalled,
    OutputSink,
    SpawnFailed,
)
from runtime.providers.agent.protocol import Exit, ProtocolError, SpawnFlag
from runtime.providers.base import (
    ByteSink,
    DirListing,
    ExecRequest,
    ExecResult,
    LimitPressure,
    OutputListener,
)

BASH = "bash"  # found on PATH, and what $0 says (as it always said)
ENV = "/usr/bin/env"
HOST_SLACK_SECONDS = 10.0
"""How long past the command's timeout and grace this side waits on its own."""
STREAM_NAMES = {1: "stdout", 2: "stderr"}
HELPER_STDERR_BYTES = 16 * 1024
LISTING_ENTRY_BYTES = 512
"""The most a listing entry of ``siesta-fs list`` takes ("TYPE SIZE NAME\\0", a name
at most 255 bytes), with room to spare."""


def run_command(channel: AgentChannel, request: ExecRequest) -> ExecResult:
    """``bash -lc`` in the workspace: the agent enforces the timeout (killing the
    process group) and keeps head and tail of each stream inside the sandbox.

    Any command still running from an earlier holder of the conversation (an
    instance that died or lost its lease) is killed first: the lease guarantees
    that nothing legitimate runs alongside this one.
    """
    flags = SpawnFlag.KILL_RUNNING | (SpawnFlag.STREAM if request.on_output else SpawnFlag(0))
    timeout_ms = request.timeout_seconds * 1000
    grace_ms = request.kill_grace_seconds * 1000
    outcome: Exit
    try:
        outcome = channel.spawn(
            _with_environment(request.environment, [BASH, "-lc", request.command]),
            timeout_ms=timeout_ms,
            grace_ms=grace_ms,
            cap_bytes=request.max_output_bytes,
            flags=flags,
            on_output=_named_streams(request.on_output),
            wait_seconds=_wait_seconds(request),
            request_id=request.request_id,
        )
    except TimeoutError:
        return _given_up(channel, request)
    return exit_result(outcome)


def collect_command(channel: AgentChannel, request: ExecRequest) -> ExecResult | None:
    """The run ``request.request_id`` started earlier: its result, waited for if it
    still runs; ``None`` when the agent knows no such run."""
    assert request.request_id is not None
    try:
        outcome = channel.collect(
            request.request_id,
            on_output=_named_streams(request.on_output),
            wait_seconds=_wait_seconds(request),
        )
    except TimeoutError:
        return _given_up(channel, request)
    return None if outcome is None else exit_result(outcome)


def _named_streams(listener: OutputListener | None) -> OutputSink | None:
    if listener is None:
        return None
    return lambda stream, chunk: listener(STREAM_NAMES.get(stream, "stderr"), chunk)


def _wait_seconds(request: ExecRequest) -> float:
    return request.timeout_seconds + request.kill_grace_seconds + HOST_SLACK_SECONDS


def _given_up(channel: AgentChannel, request: ExecRequest) -> ExecResult:
    """The agent did not end the command in time (it is frozen, or the engine lost the
    stream's end): kill it from here and say it timed out."""
    channel.cancel(request.request_id or 0)
    empty = captured(b"", b"", 0)
    waited_ms = (request.timeout_seconds + request.kill_grace_seconds) * 1000
    return ExecResult(137, empty, empty, timed_out=True, duration_ms=waited_ms)


def exit_result(outcome: Exit) -> ExecResult:
    return ExecResult(
        exit_code=outcome.exit_code,
        stdout=captured(outcome.stdout.head, outcome.stdout.tail, outcome.stdout.total_bytes),
        stderr=captured(outcome.stderr.head, outcome.stderr.tail, outcome.stderr.total_bytes),
        timed_out=outcome.timed_out,
        duration_ms=outcome.duration_ms,
        pressure=LimitPressure(
            outcome.oom_kills,
            outcome.pids_refusals,
            outcome.workspace_free_bytes,
            outcome.root_free_bytes,
        ),
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

    outcome = channel.spawn(argv, stdin=stdin_chunks, on_output=output, stall_limited=True)
    return outcome.exit_code, stderr.result().text


# -- what every provider does with a channel, errors included -----------------------------

HelperIO = Callable[[list[str], Iterable[bytes] | None, ByteSink | None], tuple[int, str]]
"""Runs a file helper: (argv, stdin chunks, stdout sink) -> (exit code, stderr)."""


def _with_environment(environment: dict[str, str], argv: list[str]) -> list[str]:
    """The agent starts commands with the sandbox's environment; ``env`` adds to it
    and replaces itself with the command (same process, same group)."""
    if not environment:
        return argv
    return [ENV, *(f"{name}={value}" for name, value in environment.items()), *argv]


def command(channel: AgentChannel, request: ExecRequest) -> ExecResult:
    """``run_command``, with a lost channel as ``sandbox_unavailable`` and a process
    that could not start as a result the model reads (exit 126)."""
    result = _translated(lambda: run_command(channel, request))
    assert result is not None  # a run always ends with a result
    return result


RECONNECTS = 3
"""How often a command is collected again through a new channel after its private
channel ended under it."""


def surviving_command(
    channel: AgentChannel, reopen: Callable[[], AgentChannel | None], request: ExecRequest
) -> ExecResult:
    """``command``; when the channel is a private one that ends mid-command, the
    command is collected through a new one (``reopen``): the relay of a private channel
    is a process in the sandbox, which a command may kill (``kill -9 -1``), but the
    command runs on in the agent, and RESULT moves it to the asking channel."""
    if channel.private and request.request_id is None:
        request = dataclasses.replace(request, request_id=secrets.randbits(63) or 1)
    try:
        return command(channel, request)
    except SandboxUnavailable as lost:
        failed = lost
        if not _relay_ended(channel, lost):
            raise
    for _ in range(RECONNECTS):
        try:
            fresh = reopen()
        except SiestaError:  # the sandbox itself is gone: what the call lost says so
            break
        if fresh is None or not fresh.private:
            break
        try:
            result = collected(fresh, request)
        except SandboxUnavailable as again:
            failed = again
            if _relay_ended(fresh, again):
                continue
            raise
        if result is not None:
            return result
        break
    raise failed


def _relay_ended(channel: AgentChannel, error: SandboxUnavailable) -> bool:
    return channel.private and channel.closed and not isinstance(error.__cause__, ChannelStalled)


def collected(channel: AgentChannel, request: ExecRequest) -> ExecResult | None:
    """``collect_command``, with errors as ``command`` has them."""
    return _translated(lambda: collect_command(channel, request))


def _translated(run: Callable[[], ExecResult | None]) -> ExecResult | None:
    try:
        return run()
    except ChannelStalled as exc:
        raise _unavailable(exc, "the command") from exc
    except ChannelClosed as exc:
        msg = f"the connection to the sandbox ended during the command; try again ({exc})"
        raise SandboxUnavailable(msg) from exc
    except SpawnFailed as exc:
        # E.g. the process limit is reached (a fork bomb still running): the
        # command could not start, which the model should read as a result.
        message = f"siesta: the command could not start: {exc} (errno {exc.errno})\n"
        stderr = captured(message.encode(), b"", len(message))
        return ExecResult(126, captured(b"", b"", 0), stderr, timed_out=False, duration_ms=0)


def helper(
    channel: AgentChannel,
    argv: list[str],
    stdin_chunks: Iterable[bytes] | None,
    stdout_sink: ByteSink | None,
) -> tuple[int, str]:
    """``run_helper``, with a lost channel or a helper that could not start as
    ``sandbox_unavailable``."""
    try:
        return run_helper(channel, argv, stdin_chunks=stdin_chunks, stdout_sink=stdout_sink)
    except ChannelStalled as exc:
        raise _unavailable(exc, "a file operation") from exc
    except ChannelClosed as exc:
        msg = f"the connection to the sandbox ended during a file operation; try again ({exc})"
        raise SandboxUnavailable(msg) from exc
    except SpawnFailed as exc:
        msg = f"the sandbox could not start its file helper: {exc}; try again"
        raise SandboxUnavailable(msg) from exc
    except _HelperOverflow as exc:
        channel.broken(ProtocolError(str(exc), "output_over_limit"))
        raise


class _HelperOverflow(SandboxUnavailable):
    """A file helper printed more than its command line allows."""


def _bounded(sink: ByteSink, limit: int) -> ByteSink:
    """``sink``, refusing more than ``limit`` bytes in all: what the helper may print
    is what the service keeps, whatever the sandbox sends."""
    received = 0

    def write(chunk: bytes) -> None:
        nonlocal received
        received += len(chunk)
        if received > limit:
            msg = f"the sandbox's file helper sent more than the {limit} bytes asked for"
            raise _HelperOverflow(msg)
        sink(chunk)

    return write


def read_file(
    io: HelperIO, path: str, max_bytes: int, sink: ByteSink, *, strict: bool = False
) -> int:
    """``SandboxInside.read_file`` through the file helper ``io`` runs."""
    argv = fshelper.read_argv(path, max_bytes, strict)
    exit_code, stderr = io(argv, None, _bounded(sink, max_bytes))
    return int(fshelper.check(exit_code, stderr, path, max_bytes)["size"])


def write_file(io: HelperIO, path: str, chunks: Iterable[bytes], max_bytes: int) -> int:
    """``SandboxInside.write_file`` through the file helper ``io`` runs."""
    exit_code, stderr = io(fshelper.write_argv(path, max_bytes), chunks, None)
    return int(fshelper.check(exit_code, stderr, path, max_bytes)["size"])


def list_dir(io: HelperIO, path: str, max_entries: int) -> DirListing:
    """``SandboxInside.list_dir`` through the file helper ``io`` runs."""
    stdout = bytearray()
    sink = _bounded(stdout.extend, max_entries * LISTING_ENTRY_BYTES)
    exit_code, stderr = io(fshelper.list_argv(path, max_entries), None, sink)
    return fshelper.parse_listing(bytes(stdout), fshelper.check(exit_code, stderr, path))


def _unavailable(stalled: ChannelStalled, during: str) -> SandboxUnavailable:
    msg = (
        f"the sandbox stopped answering during {during}: {stalled} of "
        f"{stalled.limit:g} seconds (SIESTA_SANDBOX__CHANNEL_STALL_SECONDS); try again"
    )
    return SandboxUnavailable(msg, limit=stalled.limit, unit="seconds")
