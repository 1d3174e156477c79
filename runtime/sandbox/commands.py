"""runCommand, with the conversation files it stages into ``/mnt/work/in`` first."""

from __future__ import annotations

from dataclasses import replace

from siesta_contract.functions.sandbox import OutputTruncation, RunCommandResult, StagedFile
from siesta_contract.text import is_non_blank_text

from runtime.core import tracing
from runtime.core.cancellation import Cancellation
from runtime.core.context import CallContext
from runtime.core.errors import (
    Cancelled,
    CommandTooLarge,
    InvalidCommand,
    InvalidRequest,
    OutcomeUnknown,
    SessionBusy,
    TransferTooLarge,
)
from runtime.core.output import CapturedStream
from runtime.core.records import FileRecord
from runtime.egress.service import Egress
from runtime.sandbox.limits import limits_reached
from runtime.sandbox.parts import SandboxParts, session_fields
from runtime.sandbox.paths import STAGING_FOLDER, absolute_path, unique_names
from runtime.sandbox.settings import CommandSettings
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import ExecRequest, ExecResult, OutputListener
from runtime.seams.stores import IdempotencyStore
from runtime.sessions.active import ActiveSession


class CommandFunctions(SandboxParts):
    _commands: CommandSettings
    _egress: Egress
    _sandbox_settings: SandboxSettings
    _disk_limits_mb: tuple[int | None, int | None]
    _retries: IdempotencyStore | None

    def run_command(
        self,
        ctx: CallContext,
        command: str,
        timeout_seconds: int | None = None,
        files: list[str] | None = None,
        *,
        on_output: OutputListener | None = None,
        cancellation: Cancellation | None = None,
    ) -> RunCommandResult:
        """Run ``bash -lc command`` in the conversation's ``/mnt/work``.

        ``files`` (conversation file names or ids) are staged to
        ``/mnt/work/in`` first. A nonzero exit code and a timeout are results.
        ``on_output`` gets output as it is produced; ``cancellation`` kills the
        command's process group when the caller stops waiting.
        """
        self._check_command(command)
        timeout = self._effective_timeout(timeout_seconds)
        inputs = self._staging_plan(ctx, files or [])
        request = ExecRequest(
            command=command,
            timeout_seconds=timeout,
            max_output_bytes=self._commands.max_output_bytes,
            kill_grace_seconds=self._commands.kill_grace_seconds,
            on_output=on_output,
            request_id=ctx.retry.request_id if ctx.retry else None,
        )
        cancellation = cancellation or Cancellation()
        with self._sessions.operation(ctx) as session:
            # Under the lease: a deletion, which holds it, revokes every earlier credential.
            request = replace(request, environment=self._egress.environment(ctx))
            session_id = session.record.session_id
            with tracing.span("sandbox.stage", session_id=session_id, files=len(inputs)):
                self._count_staged(ctx, session, [record for _, record in inputs])
                staged = [self._stage(session, name, record) for name, record in inputs]
            sandbox_id = session.record.sandbox_id
            if cancellation.cancelled:
                msg = "the caller went away before the command started"
                raise Cancelled(msg)
            with (
                tracing.span(
                    "sandbox.exec", session_id=session_id, timeout_seconds=timeout
                ) as span,
                cancellation.on_cancel(lambda: self._provider.inside.cancel_exec(sandbox_id)),
            ):
                result = self._run_once(ctx, sandbox_id, request)
                span.set_attribute("siesta.exit_code", result.exit_code)
                span.set_attribute("siesta.timed_out", result.timed_out)
        return RunCommandResult(
            exitCode=result.exit_code,
            stdout=result.stdout.text,
            stderr=result.stderr.text,
            timedOut=result.timed_out,
            timeoutSeconds=timeout,
            truncated=_truncation(result.stdout, result.stderr, request.max_output_bytes),
            durationMs=result.duration_ms,
            stagedFiles=staged,
            limitsReached=limits_reached(
                result,
                timeout_seconds=timeout,
                max_output_bytes=request.max_output_bytes,
                sandbox=self._sandbox_settings,
                workspace_limit_mb=self._disk_limits_mb[0],
                container_disk_limit_mb=self._disk_limits_mb[1],
            ),
            **session_fields(session),
        )

    def _run_once(self, ctx: CallContext, sandbox_id: str, request: ExecRequest) -> ExecResult:
        """Runs the command, at most once per ``Idempotency-Key``: a retry of a call whose
        run was handed to this sandbox collects that run's result instead."""
        retry = ctx.retry
        if retry is None or self._retries is None:
            return self._provider.inside.exec(sandbox_id, request)
        if retry.dispatched is not None:
            if retry.dispatched == sandbox_id:
                collected = self._provider.inside.collect(sandbox_id, request)
                if collected is not None:
                    return collected
            msg = (
                "a request with this Idempotency-Key handed the command to the sandbox, "
                "which no longer knows how that run ended (the sandbox restarted since, or "
                "the result is no longer kept); it is not run again: look at the workspace, "
                "and send a new key to run it"
            )
            raise OutcomeUnknown(msg)
        if not self._retries.mark_dispatched(retry.key, retry.owner, sandbox_id):
            msg = "another request took this Idempotency-Key over; nothing was run here"
            raise SessionBusy(msg)
        return self._provider.inside.exec(sandbox_id, request)

    def _check_command(self, command: str) -> None:
        if "\x00" in command:
            msg = "command contains a NUL byte"
            raise InvalidCommand(msg)
        if not is_non_blank_text(command):
            msg = "command is empty"
            raise InvalidCommand(msg)
        size = len(command.encode("utf-8", errors="surrogatepass"))
        limit = self._commands.max_command_bytes
        if size > limit:
            msg = (
                f"command is {size} bytes, over the limit of {limit} bytes; "
                "write long scripts to a file first and run the file"
            )
            raise CommandTooLarge(msg, limit=limit, unit="bytes", size=size)

    def _effective_timeout(self, requested: int | None) -> int:
        maximum = self._commands.max_timeout_seconds
        if requested is None:
            return min(self._commands.default_timeout_seconds, maximum)
        if requested < 1:
            msg = "timeoutSeconds must be at least 1"
            raise InvalidRequest(msg)
        return min(requested, maximum)

    def _staging_plan(self, ctx: CallContext, wanted: list[str]) -> list[tuple[str, FileRecord]]:
        """Which files go where, checked against the limits before anything runs."""
        limits = self._limits
        if len(wanted) > limits.max_stage_files:
            msg = f"{len(wanted)} files requested, over the limit of {limits.max_stage_files}"
            raise TransferTooLarge(msg, limit=limits.max_stage_files, unit="files")
        records = self._files.resolve(ctx, wanted)
        for record in records:
            if record.size > limits.max_stage_file_bytes:
                msg = (
                    f"{record.name!r} is {record.size} bytes, over the staging limit of "
                    f"{limits.max_stage_file_bytes} bytes per file"
                )
                raise TransferTooLarge(
                    msg, limit=limits.max_stage_file_bytes, unit="bytes", name=record.name
                )
        total = sum(record.size for record in records)
        if total > limits.max_stage_total_bytes:
            msg = (
                f"the files add up to {total} bytes, over the staging limit of "
                f"{limits.max_stage_total_bytes} bytes per call"
            )
            raise TransferTooLarge(msg, limit=limits.max_stage_total_bytes, unit="bytes")
        names = unique_names([record.name for record in records])
        return list(zip(names, records, strict=True))

    def _count_staged(
        self, ctx: CallContext, session: ActiveSession, records: list[FileRecord]
    ) -> None:
        """Count the files against the conversation's staging total before any is copied.

        The total belongs to the sandbox: a replaced sandbox starts from zero. A file
        staged again with the same bytes counts once (it is copied again all the same,
        so the agent gets back what it may have changed)."""
        if not records:
            return
        limit = self._limits.max_staged_bytes_per_conversation
        count = self._files.count_staged(ctx, session.record.session_id, records, limit)
        if not count.accepted:
            msg = (
                f"staging these files would add {count.added} bytes to the {count.total} "
                f"bytes already staged into this conversation's sandbox, over the limit of "
                f"{limit} bytes per conversation; work with the files already in "
                "/mnt/work/in or stage fewer"
            )
            raise TransferTooLarge(
                msg,
                limit=limit,
                unit="bytes",
                scope="conversation",
                stagedBytes=count.total,
                requestedBytes=count.added,
            )

    def _stage(self, session: ActiveSession, name: str, record: FileRecord) -> StagedFile:
        path = f"{STAGING_FOLDER}/{name}"
        size = self._provider.inside.write_file(
            session.record.sandbox_id,
            path,
            self._files.chunks(record),
            self._limits.max_stage_file_bytes,
        )
        return StagedFile(
            name=record.name, fileId=record.file_id, path=absolute_path(path), size=size
        )


def _truncation(stdout: CapturedStream, stderr: CapturedStream, limit: int) -> OutputTruncation:
    return OutputTruncation(
        stdout=stdout.truncated,
        stderr=stderr.truncated,
        stdoutBytes=stdout.total_bytes,
        stderrBytes=stderr.total_bytes,
        limitBytes=limit,
    )
