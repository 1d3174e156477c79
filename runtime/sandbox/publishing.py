"""publishFiles: workspace files become the conversation's artifacts, one by one."""

from __future__ import annotations

import posixpath

from siesta_contract.functions.sandbox import PublishError, PublishFilesResult, PublishOutcome

from runtime.core import tracing
from runtime.core.context import CallContext
from runtime.core.errors import FileMissing, InvalidRequest, SiestaError
from runtime.core.records import FileKind, FileRecord
from runtime.files.conversation import BlobWriter, content_type_for
from runtime.functions.files import file_public
from runtime.sandbox.parts import SandboxParts, session_fields
from runtime.sandbox.paths import workspace_path
from runtime.sessions.active import ActiveSession


class PublishFunctions(SandboxParts):
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
            **session_fields(session),
        )

    def _publish_one(self, ctx: CallContext, session: ActiveSession, path: str) -> FileRecord:
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes)
        name = posixpath.basename(relative)
        limit = self._limits.max_publish_bytes

        def fill(writer: BlobWriter) -> None:
            self._provider.inside.read_file(
                session.record.sandbox_id, relative, limit, writer.write, strict=True
            )

        return self._files.add(ctx, name, content_type_for(name), FileKind.ARTIFACT, fill, limit)


def _publish_error(error: SiestaError) -> PublishError:
    details = error.to_dict()
    if isinstance(error, FileMissing):
        details["code"] = "publish_target_missing"
    return PublishError.model_validate(details)
