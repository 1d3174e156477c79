"""The agent's five sandbox functions: runCommand, writeFile, readFile, listFiles,
publishFiles (plus staging of conversation files for runCommand).

Results are the function models of ``siesta_contract/functions/sandbox.py``, in the wire
shape (camelCase) the agent backend forwards to the model. Every function checks
its arguments before it touches the conversation's sandbox.
"""

from __future__ import annotations

import base64
import codecs
import posixpath
from dataclasses import replace
from typing import Any

from siesta_contract.functions.sandbox import (
    DirEntryPublic,
    ListFilesResult,
    OutputTruncation,
    PublishError,
    PublishFilesResult,
    PublishOutcome,
    ReadFileResult,
    RunCommandResult,
    StagedFile,
    WriteFileResult,
)
from siesta_contract.text import is_non_blank_text

from runtime.core import tracing
from runtime.core.cancellation import Cancellation
from runtime.core.context import CallContext
from runtime.core.errors import (
    Cancelled,
    CommandTooLarge,
    FileMissing,
    InvalidArguments,
    InvalidCommand,
    InvalidRequest,
    OffsetPastEnd,
    OutcomeUnknown,
    SessionBusy,
    SiestaError,
    TransferTooLarge,
)
from runtime.core.output import CapturedStream
from runtime.core.records import FileKind, FileRecord
from runtime.egress.service import Egress
from runtime.files.conversation import BlobWriter, ConversationFiles, content_type_for
from runtime.files.settings import FileSettings
from runtime.functions.files import file_public
from runtime.providers.base import ExecRequest, ExecResult, OutputListener, SandboxProvider
from runtime.providers.settings import SandboxSettings
from runtime.sandbox.limits import limits_reached
from runtime.sandbox.paths import STAGING_FOLDER, absolute_path, unique_names, workspace_path
from runtime.sandbox.settings import CommandSettings
from runtime.sessions.manager import ActiveSession, SessionManager
from runtime.store.base import IdempotencyStore


class Sandbox:
    def __init__(
        self,
        sessions: SessionManager,
        provider: SandboxProvider,
        files: ConversationFiles,
        commands: CommandSettings,
        limits: FileSettings,
        egress: Egress | None = None,
        sandbox_settings: SandboxSettings | None = None,
        disk_limits_mb: tuple[int | None, int | None] = (None, None),
        retries: IdempotencyStore | None = None,
    ) -> None:
        """``disk_limits_mb``: the workspace's and the writable layer's sizes where the
        provider enforces them (``None``: no limit of ours to name when one is full).
        ``retries``: where a command with an ``Idempotency-Key`` records the sandbox it
        is handed to, so a retry after its instance died collects it there."""
        self._retries = retries
        self._egress = egress or Egress()
        self._sandbox_settings = sandbox_settings or SandboxSettings()
        self._disk_limits_mb = disk_limits_mb
        self._sessions = sessions
        self._provider = provider
        self._files = files
        self._commands = commands
        self._limits = limits

    # -- runCommand ---------------------------------------------------------------

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
                cancellation.on_cancel(lambda: self._provider.cancel_exec(sandbox_id)),
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
            **_session_fields(session),
        )

    def _run_once(self, ctx: CallContext, sandbox_id: str, request: ExecRequest) -> ExecResult:
        """Runs the command, at most once per ``Idempotency-Key``: a retry of a call whose
        run was handed to this sandbox collects that run's result instead."""
        retry = ctx.retry
        if retry is None or self._retries is None:
            return self._provider.exec(sandbox_id, request)
        if retry.dispatched is not None:
            if retry.dispatched == sandbox_id:
                collected = self._provider.collect(sandbox_id, request)
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
        return self._provider.exec(sandbox_id, request)

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
        size = self._provider.write_file(
            session.record.sandbox_id,
            path,
            self._files.chunks(record),
            self._limits.max_stage_file_bytes,
        )
        return StagedFile(
            name=record.name, fileId=record.file_id, path=absolute_path(path), size=size
        )

    # -- writeFile / readFile / listFiles --------------------------------------------

    def write_file(self, ctx: CallContext, path: str, content: str) -> WriteFileResult:
        """Write UTF-8 text to a workspace file, creating parent folders."""
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes)
        data = content.encode("utf-8", errors="strict")
        limit = self._limits.max_write_bytes
        if len(data) > limit:
            msg = (
                f"content is {len(data)} bytes, over the writeFile limit of {limit} bytes; "
                "create large content with a command instead (runCommand)"
            )
            raise TransferTooLarge(msg, limit=limit, unit="bytes", size=len(data))
        with self._sessions.operation(ctx) as session:
            size = self._provider.write_file(session.record.sandbox_id, relative, [data], limit)
        return WriteFileResult(path=absolute_path(relative), size=size, **_session_fields(session))

    def read_file(
        self, ctx: CallContext, path: str, max_bytes: int | None = None, offset: int = 0
    ) -> ReadFileResult:
        """Up to ``max_bytes`` from byte ``offset``: text as text, anything not UTF-8 as
        base64. ``nextOffset`` says where the next page starts (``None``: the end).

        A text page never starts or ends inside a character: an ``offset`` that falls
        inside one moves forward to the next character (the result's ``offset`` says
        where it starts), and a cut character is left to the next page. An offset past
        the end of the file is ``invalid_arguments`` naming the size; the size itself
        is an empty last page.
        """
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes)
        if max_bytes is not None and max_bytes < 1:
            msg = "maxBytes must be at least 1"
            raise InvalidRequest(msg)
        if offset < 0:
            msg = "offset must be at least 0"
            raise InvalidArguments(msg, offset=offset)
        limit = min(max_bytes or self._limits.max_read_bytes, self._limits.max_read_bytes)
        window = _Window(offset)
        slack = _MAX_CONTINUATION if offset else 0  # room to move past a split character
        with self._sessions.operation(ctx) as session:
            # siesta-fs reads from the start: the bytes before the offset are dropped
            # as they stream by, never kept.
            size = self._provider.read_file(
                session.record.sandbox_id, relative, offset + limit + slack, window.write
            )
        if offset > size:
            msg = f"offset {offset} is past the end of {path!r}, which is {size} bytes"
            raise OffsetPastEnd(msg, offset=offset, size=size, path=absolute_path(relative))
        content, encoding, skipped, returned = _page(bytes(window.data), offset, limit, size)
        start = offset + skipped
        end = start + returned
        return ReadFileResult(
            path=absolute_path(relative),
            content=content,
            encoding=encoding,
            size=size,
            offset=start,
            returnedBytes=returned,
            nextOffset=end if end < size else None,
            truncated=end < size,
            limitBytes=limit,
            **_session_fields(session),
        )

    def list_files(self, ctx: CallContext, path: str = ".") -> ListFilesResult:
        """One folder, not recursive: name, size and whether each entry is a folder."""
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes, allow_root=True)
        limit = self._limits.max_list_entries
        with self._sessions.operation(ctx) as session:
            listing = self._provider.list_dir(session.record.sandbox_id, relative, limit)
        return ListFilesResult(
            path=absolute_path(relative),
            entries=[
                DirEntryPublic(
                    name=e.name, size=e.size, isDirectory=e.kind == "directory", type=e.kind
                )
                for e in listing.entries
            ],
            total=listing.total,
            truncated=listing.total > len(listing.entries),
            limitEntries=limit,
            **_session_fields(session),
        )

    # -- publishFiles ---------------------------------------------------------------

    def publish_files(self, ctx: CallContext, paths: list[str]) -> PublishFilesResult:
        """Each named workspace file becomes a new artifact; failures are per path."""
        if not paths:
            msg = "paths must name at least one file"
            raise InvalidRequest(msg)
        if len(paths) > self._limits.max_publish_paths:
            msg = f"{len(paths)} paths, over the limit of {self._limits.max_publish_paths} per call"
            raise InvalidRequest(msg, limit=self._limits.max_publish_paths, unit="paths")
        results = []
        with (
            self._sessions.operation(ctx) as session,
            tracing.span(
                "sandbox.publish", session_id=session.record.session_id, files=len(paths)
            ) as span,
        ):
            for path in paths:
                try:
                    record = self._publish_one(ctx, session, path)
                except SiestaError as error:
                    results.append(PublishOutcome(path=path, error=_publish_error(error)))
                else:
                    results.append(PublishOutcome(path=path, artifact=file_public(record)))
            failed = sum(1 for result in results if result.error is not None)
            span.set_attribute("siesta.failed", failed)
        return PublishFilesResult(
            files=results,
            published=len(results) - failed,
            failed=failed,
            partial=0 < failed < len(results),
            **_session_fields(session),
        )

    def _publish_one(self, ctx: CallContext, session: ActiveSession, path: str) -> FileRecord:
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes)
        name = posixpath.basename(relative)
        limit = self._limits.max_publish_bytes

        def fill(writer: BlobWriter) -> None:
            self._provider.read_file(
                session.record.sandbox_id, relative, limit, writer.write, strict=True
            )

        return self._files.add(ctx, name, content_type_for(name), FileKind.ARTIFACT, fill, limit)


def _session_fields(session: ActiveSession) -> dict[str, Any]:
    return {
        "workspaceReset": session.workspace_reset,
        "workspaceResetReason": session.reset_reason.value if session.reset_reason else None,
        "resumed": session.resumed,
        "sandboxRecreated": session.sandbox_recreated,
        "sessionId": session.record.session_id,
    }


def _truncation(stdout: CapturedStream, stderr: CapturedStream, limit: int) -> OutputTruncation:
    return OutputTruncation(
        stdout=stdout.truncated,
        stderr=stderr.truncated,
        stdoutBytes=stdout.total_bytes,
        stderrBytes=stderr.total_bytes,
        limitBytes=limit,
    )


class _Window:
    """A byte sink that drops everything before ``offset`` and keeps the rest."""

    def __init__(self, offset: int) -> None:
        self._skip = offset
        self.data = bytearray()

    def write(self, chunk: bytes) -> None:
        if self._skip >= len(chunk):
            self._skip -= len(chunk)
            return
        self.data += chunk[self._skip :]
        self._skip = 0


_MAX_CONTINUATION = 3
"""Bytes of one UTF-8 character after its first."""


def _page(data: bytes, offset: int, limit: int, size: int) -> tuple[str, str, int, int]:
    """(content, encoding, bytes skipped at the start, bytes returned) of the page of
    at most ``limit`` bytes in ``data``, which starts at ``offset`` of a file of ``size``.

    A page at an offset may start in the middle of a character: up to three
    continuation bytes there are skipped when what follows is text."""
    lead = 0
    if offset:
        while lead < min(_MAX_CONTINUATION, len(data)) and 0x80 <= data[lead] <= 0xBF:
            lead += 1
    for skip in dict.fromkeys((lead, 0)):
        chunk = data[skip : skip + limit]
        text = _utf8(chunk, cut=offset + skip + len(chunk) < size)
        if text is not None and (skip + text[1] > 0 or not chunk):
            return text[0], "utf-8", skip, text[1]
    # Not text, or one character longer than the page: raw bytes, so a reader
    # that follows nextOffset always moves on.
    chunk = data[:limit]
    return base64.b64encode(chunk).decode("ascii"), "base64", 0, len(chunk)


def _utf8(data: bytes, *, cut: bool) -> tuple[str, int] | None:
    """(text, bytes used), or ``None`` when ``data`` is not UTF-8. A cut may split the
    last character: those few bytes are left out rather than turning a text file into
    base64."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        text = decoder.decode(data, final=not cut)
    except UnicodeDecodeError:
        return None
    pending, _ = decoder.getstate()
    return text, len(data) - len(pending)


def _publish_error(error: SiestaError) -> PublishError:
    details = error.to_dict()
    if isinstance(error, FileMissing):
        details["code"] = "publish_target_missing"
    return PublishError.model_validate(details)
