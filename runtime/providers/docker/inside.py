"""Inside Docker sandboxes: the agent channel, or an engine exec where there is no agent.

A Docker-only variant of ``AgentInside``: sandboxes made before the agent existed
have no channel (their container's stdin is closed), and every command and file
helper then runs as one engine exec (``engine_exec.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.providers.agent import ops
from runtime.providers.agent.channels import AgentChannels
from runtime.providers.agent.inside import AgentInside
from runtime.providers.base import ByteSink, ExecRequest, ExecResult
from runtime.providers.docker.engine_exec import EngineExec


class DockerInside(AgentInside):
    """Commands and workspace files of Docker sandboxes (``SandboxInside``)."""

    def __init__(self, channels: AgentChannels, engine: EngineExec) -> None:
        super().__init__(channels)
        self._engine = engine

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        channel = self._channels.get(sandbox_id)
        if channel is None:
            return self._engine.run_command(sandbox_id, request)
        return ops.surviving_command(channel, lambda: self._channels.get(sandbox_id), request)

    def collect(self, sandbox_id: str, request: ExecRequest) -> ExecResult | None:
        channel = self._channels.get(sandbox_id)
        if channel is None:
            return None  # an engine exec keeps nothing to ask about later
        return ops.collected(channel, request)

    def cancel_exec(self, sandbox_id: str) -> None:
        channel = self._channels.existing(sandbox_id)
        if channel is not None:
            channel.cancel()
        elif not self._channels.has_agent(sandbox_id):
            self._engine.kill_command_group(sandbox_id)

    def _helper(self, sandbox_id: str) -> ops.HelperIO:
        """File helpers through the agent (or an engine exec without one)."""

        def run(
            argv: list[str], stdin_chunks: Iterable[bytes] | None, stdout_sink: ByteSink | None
        ) -> tuple[int, str]:
            channel = self._channels.get(sandbox_id)
            if channel is None:
                return self._engine.run_helper(
                    sandbox_id, argv, stdin_chunks=stdin_chunks, stdout_sink=stdout_sink
                )
            return ops.helper(channel, argv, stdin_chunks, stdout_sink)

        return run
