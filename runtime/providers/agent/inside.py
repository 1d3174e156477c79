"""``SandboxInside`` over the agent channel: commands and files, once for every provider.

A provider whose sandboxes run the agent implements only their lifecycle and how
to open a channel to the agent (an ``AgentChannels`` opener: a Docker attach, a
Kubernetes attach); this class does the rest through those channels. The
lifecycle drops a sandbox's channel when it stops or removes the sandbox.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent import ops, processes, table
from runtime.providers.agent.channel import AgentChannel, ChannelClosed, SpawnFailed
from runtime.providers.agent.channels import AgentChannels
from runtime.providers.base import (
    ByteSink,
    DirListing,
    ExecRequest,
    ExecResult,
    OutputEvent,
    ProcessEntry,
    ProcessSpec,
    RunningProcess,
)


class AgentInside:
    """Commands and workspace files of sandboxes, over their agent channels."""

    def __init__(self, channels: AgentChannels) -> None:
        self._channels = channels

    def warm(self, sandbox_id: str) -> None:
        self._channels.get(sandbox_id)

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        channel = self._channel(sandbox_id)
        return ops.surviving_command(channel, lambda: self._channels.get(sandbox_id), request)

    def collect(self, sandbox_id: str, request: ExecRequest) -> ExecResult | None:
        return ops.collected(self._channel(sandbox_id), request)

    def cancel_exec(self, sandbox_id: str) -> None:
        channel = self._channels.existing(sandbox_id)
        if channel is not None:
            channel.cancel()

    def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, sink: ByteSink, *, strict: bool = False
    ) -> int:
        return ops.read_file(self._helper(sandbox_id), path, max_bytes, sink, strict=strict)

    def write_file(
        self, sandbox_id: str, path: str, chunks: Iterable[bytes], max_bytes: int
    ) -> int:
        return ops.write_file(self._helper(sandbox_id), path, chunks, max_bytes)

    def list_dir(self, sandbox_id: str, path: str, max_entries: int) -> DirListing:
        return ops.list_dir(self._helper(sandbox_id), path, max_entries)

    def start_process(self, sandbox_id: str, spec: ProcessSpec) -> RunningProcess:
        return processes.start(self._channel(sandbox_id), spec)

    def process_table(self, sandbox_id: str) -> list[ProcessEntry] | None:
        channel = self._channel(sandbox_id)
        if not channel.private:
            return None
        with _unavailable_unless_answered("list its processes"):
            return table.table(channel)

    def follow_process(self, sandbox_id: str, entry: ProcessEntry) -> RunningProcess:
        channel = self._channel(sandbox_id)
        if not channel.private:
            msg = "this sandbox's processes are served only by the instance that started them"
            raise SandboxUnavailable(msg)
        return table.FollowedProcess(channel, entry.pid, terminal=entry.pty, start=entry.end)

    def process_output(
        self, sandbox_id: str, entry: ProcessEntry, start: int
    ) -> list[tuple[str, bytes]]:
        channel = self._channel(sandbox_id)
        if not channel.private:
            return []
        with _unavailable_unless_answered("send a process's output"):
            return table.output(channel, entry, start)

    def stream_output(
        self, sandbox_id: str, entry: ProcessEntry, start: int, stop: threading.Event
    ) -> Iterator[OutputEvent]:
        channel = self._private(sandbox_id)
        try:
            yield from table.stream(channel, entry, start, stop)
        except (ChannelClosed, SpawnFailed, TimeoutError) as exc:
            msg = f"the process's output stream ended: {exc}; connect again"
            raise SandboxUnavailable(msg) from exc

    def untaken_output(
        self, sandbox_id: str, entry: ProcessEntry
    ) -> tuple[int, list[tuple[int, bytes]]]:
        channel = self._private(sandbox_id)
        with _unavailable_unless_answered("send a process's output"):
            return table.untaken(channel, entry)

    def take_output(self, sandbox_id: str, entry: ProcessEntry, upto: int) -> None:
        channel = self._private(sandbox_id)
        with _unavailable_unless_answered("move a process's cursor"):
            table.take(channel, entry.pid, upto)

    def _private(self, sandbox_id: str) -> AgentChannel:
        channel = self._channel(sandbox_id)
        if not channel.private:
            msg = "this sandbox's agent keeps no process table this instance can ask"
            raise SandboxUnavailable(msg)
        return channel

    def _helper(self, sandbox_id: str) -> ops.HelperIO:
        """Runs a file helper (``siesta-fs``) in the sandbox, over its channel."""

        def run(
            argv: list[str], stdin_chunks: Iterable[bytes] | None, stdout_sink: ByteSink | None
        ) -> tuple[int, str]:
            return ops.helper(self._channel(sandbox_id), argv, stdin_chunks, stdout_sink)

        return run

    def _channel(self, sandbox_id: str) -> AgentChannel:
        channel = self._channels.get(sandbox_id)
        if channel is None:
            msg = f"the sandbox {sandbox_id} has no agent"
            raise SandboxUnavailable(msg)
        return channel


@contextlib.contextmanager
def _unavailable_unless_answered(what: str) -> Iterator[None]:
    """A table request the agent did not answer: its channel broke, it refused, or it
    stayed silent (a sandbox frozen under the call: paused meanwhile) past the wait."""
    try:
        yield
    except TimeoutError as exc:
        msg = (
            f"the sandbox's agent did not {what} within {table.ANSWER_SECONDS:g} s "
            "(is the sandbox paused?); try again"
        )
        raise SandboxUnavailable(msg) from exc
    except (ChannelClosed, SpawnFailed) as exc:
        msg = f"the sandbox's agent did not {what}: {exc}; try again"
        raise SandboxUnavailable(msg) from exc
