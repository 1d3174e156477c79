"""The agent's sandbox functions. This slice: ``runCommand``.

Results are plain dicts in the wire shape (camelCase), because the agent
backend forwards them to the model almost verbatim.
"""

from __future__ import annotations

from typing import Any

from runtime.config import CommandSettings
from runtime.context import CallContext
from runtime.errors import CommandTooLarge, InvalidRequest
from runtime.output import CapturedStream
from runtime.providers.base import ExecRequest, SandboxProvider
from runtime.sessions import SessionManager


class Sandbox:
    def __init__(
        self, sessions: SessionManager, provider: SandboxProvider, settings: CommandSettings
    ) -> None:
        self._sessions = sessions
        self._provider = provider
        self._settings = settings

    def run_command(
        self, ctx: CallContext, command: str, timeout_seconds: int | None = None
    ) -> dict[str, Any]:
        """Run ``bash -lc command`` in the conversation's ``/mnt/work``.

        A nonzero exit code and a timeout are results, not errors.
        """
        self._check_command(command)
        timeout = self._effective_timeout(timeout_seconds)
        request = ExecRequest(
            command=command,
            timeout_seconds=timeout,
            max_output_bytes=self._settings.max_output_bytes,
            kill_grace_seconds=self._settings.kill_grace_seconds,
        )
        with self._sessions.operation(ctx) as session:
            result = self._provider.exec(session.record.sandbox_id, request)
        return {
            "exitCode": result.exit_code,
            "stdout": result.stdout.text,
            "stderr": result.stderr.text,
            "timedOut": result.timed_out,
            "timeoutSeconds": timeout,
            "truncated": _truncation(result.stdout, result.stderr, request.max_output_bytes),
            "durationMs": result.duration_ms,
            "workspaceReset": session.workspace_reset,
            "sessionId": session.record.session_id,
        }

    def _check_command(self, command: str) -> None:
        if not command.strip():
            msg = "command is empty"
            raise InvalidRequest(msg, code="invalid_command")
        if "\x00" in command:
            msg = "command contains a NUL byte"
            raise InvalidRequest(msg, code="invalid_command")
        size = len(command.encode("utf-8"))
        limit = self._settings.max_command_bytes
        if size > limit:
            msg = (
                f"command is {size} bytes, over the limit of {limit} bytes; "
                "write long scripts to a file first and run the file"
            )
            raise CommandTooLarge(msg, limit=limit, unit="bytes", size=size)

    def _effective_timeout(self, requested: int | None) -> int:
        if requested is None:
            return min(self._settings.default_timeout_seconds, self._settings.max_timeout_seconds)
        if requested < 1:
            msg = "timeoutSeconds must be at least 1"
            raise InvalidRequest(msg)
        return min(requested, self._settings.max_timeout_seconds)


def _truncation(stdout: CapturedStream, stderr: CapturedStream, limit: int) -> dict[str, Any]:
    return {
        "stdout": stdout.truncated,
        "stderr": stderr.truncated,
        "stdoutBytes": stdout.total_bytes,
        "stderrBytes": stderr.total_bytes,
        "limitBytes": limit,
    }
