"""Errors of Siesta Runtime: one root, stable machine codes.

Every error carries a ``code`` (snake_case, part of the API: clients and agents
branch on it) and structured ``fields`` such as ``limit`` or ``path``. Errors
caused by a limit always carry the limit in force, because agents are told to
trust that value.

Over 400 lines on purpose: it is the one table of every error the API can answer,
each a few lines; split by area, the tree below would no longer be in one place.

    SiestaError                        internal_error (a bug: never shown beyond the code)
    ├── InvalidRequest                 invalid_request (problems)
    │   ├── InvalidJson                invalid_json
    │   ├── MissingContext             missing_context (headers)
    │   ├── InvalidContext             invalid_context
    │   ├── InvalidConversationId      invalid_conversation_id
    │   ├── InvalidCommand             invalid_command
    │   ├── CommandTooLarge            command_too_large (limit)
    │   ├── InvalidCode                invalid_code
    │   ├── CodeTooLarge               code_too_large (limit)
    │   ├── InvalidFileName            invalid_file_name (limit)
    │   ├── FileNotEditable            file_not_editable
    │   ├── InvalidArguments           invalid_arguments (a tool call's arguments)
    │   ├── InvalidIdempotencyKey      invalid_idempotency_key (limit)
    │   └── InvalidHeader              invalid_header (header)
    ├── RequestTooLarge                request_too_large (limit)
    ├── Unauthorized                   unauthorized
    ├── Forbidden                      forbidden
    │   ├── ForbiddenScope             forbidden_scope (scope, token)
    │   ├── OrgNotAllowed              org_not_allowed (org, token)
    │   ├── UserNotAllowed             user_not_allowed (user, token)
    │   └── SelfApprovalNotAllowed     self_approval_not_allowed (token)
    ├── NotFound                       not_found
    ├── MethodNotAllowed               method_not_allowed (allow)
    ├── HttpError                      http_error
    ├── SandboxDisabled                sandbox_disabled
    ├── ImageError
    │   ├── ImageRequired              image_required
    │   ├── ImageNotInCatalog          image_not_in_catalog (imageId)
    │   ├── ImageUnavailable           image_unavailable (imageId, imageRef)
    │   ├── CatalogInvalid             catalog_invalid
    │   ├── ImageBuildFailed           image_build_failed
    │   ├── ImageNameOutsideCatalog    image_name_outside_catalog (image, expected)
    │   └── DockerfileNotAllowed       dockerfile_not_allowed (instruction)
    ├── ProvisioningFailed             provisioning_failed
    │   └── ProvisioningTimeout        provisioning_timeout (limit)
    ├── ProviderUnavailable            provider_unavailable
    │   └── SandboxUnavailable         sandbox_unavailable
    │       └── SandboxBroken          sandbox_broken (it cannot start any more: recreated)
    ├── WorkspaceError                 (about one path; carries ``path``)
    │   ├── InvalidPath                invalid_path
    │   ├── PathOutsideWorkspace       path_outside_workspace
    │   ├── FileMissing                file_not_found (publishFiles: publish_target_missing)
    │   ├── NotAFile                   not_a_file
    │   └── NotADirectory              not_a_directory
    ├── TransferTooLarge               transfer_too_large (limit)
    ├── MissingInput                   missing_input (missing)
    ├── ResumeTimeout                  resume_timeout (limit)
    ├── SessionBusy                    session_busy (limit: seconds waited)
    ├── IdempotencyKeyReused           idempotency_key_reused (the key came with another request)
    ├── OffsetPastEnd                  offset_past_end (offset, size: the file is shorter now)
    ├── IdempotentResultNotKept        idempotency_result_not_kept (limit: bytes kept)
    ├── OutcomeUnknown                 outcome_unknown (a retry after the first run's instance died)
    ├── LeaseExpired                   lease_expired (limit: lease TTL)
    ├── CapacityUnavailable            capacity_unavailable (scope, limit)
    ├── StateUnavailable               state_unavailable
    │   └── StoreSchemaTooNew          state_unavailable (storeVersion, codeVersion)
    ├── ConfigurationError             configuration_error
    ├── SnapshotsNotSupported          snapshots_not_supported (the provider cannot)
    │   └── SnapshotMemoryNotSupported snapshot_memory_not_supported (reason)
    ├── MetricsNotSupported            metrics_not_supported (the provider cannot)
    ├── JsUnavailable                  js_unavailable (limit)
    ├── Cancelled                      cancelled (the caller went away; nobody reads it)
    └── ToolError                      (the tool layer; results with ok: false)
        ├── FunctionNotAvailable       function_not_available
        ├── ApprovalRequired           approval_required (approvalId)
        ├── ApprovalDenied             approval_denied
        ├── ApprovalAlreadyDecided     approval_already_decided (execution)
        ├── ApprovalExpired            approval_expired (limit: the approval TTL)
        ├── ApprovalCancelled          approval_cancelled (its conversation was deleted)
        ├── ToolNotConfigured          tool_not_configured
        ├── ToolFailed                 tool_failed
        ├── SubAgentNotAllowed         sub_agent_not_allowed (refused, allowed)
        ├── ProviderFailed             provider_failed (status, limit)
        ├── CrawlTimeout               crawl_timeout (limit)
        └── FetchFailed                fetch_failed (url)
            └── UrlNotAllowed          url_not_allowed

A JavaScript script that fails is a *result*, not an error; its ``error.code`` is
one of the ``JS_*`` codes below. A command that exits nonzero or times out is
*not* an error either: it is a result with ``exitCode`` and ``timedOut``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SiestaError(Exception):
    """Root of every error the runtime raises on purpose."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]  # per-instance refinement of the class code
        self.fields: dict[str, Any] = fields

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.fields}


class InvalidRequest(SiestaError, ValueError):
    code = "invalid_request"


class InvalidJson(InvalidRequest):
    code = "invalid_json"


class MissingContext(InvalidRequest):
    code = "missing_context"


class InvalidContext(InvalidRequest):
    code = "invalid_context"


class InvalidConversationId(InvalidRequest):
    code = "invalid_conversation_id"


class InvalidCommand(InvalidRequest):
    code = "invalid_command"


class CommandTooLarge(InvalidRequest):
    code = "command_too_large"


class InvalidCode(InvalidRequest):
    code = "invalid_code"


class CodeTooLarge(InvalidRequest):
    code = "code_too_large"


class InvalidFileName(InvalidRequest):
    code = "invalid_file_name"


class FileNotEditable(InvalidRequest):
    code = "file_not_editable"


class InvalidArguments(InvalidRequest):
    code = "invalid_arguments"


class RequestTooLarge(SiestaError):
    code = "request_too_large"


class Unauthorized(SiestaError):
    code = "unauthorized"


class Forbidden(SiestaError, PermissionError):
    """The token is valid but may not do this."""

    code = "forbidden"


class ForbiddenScope(Forbidden):
    code = "forbidden_scope"


class OrgNotAllowed(Forbidden):
    """The token is bound to other orgs than the one the call names."""

    code = "org_not_allowed"


class UserNotAllowed(Forbidden):
    """The token is bound to another user than the one the call names."""

    code = "user_not_allowed"


class SelfApprovalNotAllowed(Forbidden):
    code = "self_approval_not_allowed"


class NotFound(SiestaError, LookupError):
    code = "not_found"


class MethodNotAllowed(SiestaError):
    code = "method_not_allowed"


class HttpError(SiestaError):
    """Another answer of the HTTP layer itself (rare)."""

    code = "http_error"


class SandboxDisabled(SiestaError):
    code = "sandbox_disabled"


class ImageError(SiestaError):
    code = "image_error"


class ImageRequired(ImageError):
    code = "image_required"


class ImageNotInCatalog(ImageError):
    code = "image_not_in_catalog"


class ImageUnavailable(ImageError):
    code = "image_unavailable"


class ImageRetired(ImageError):
    """The selection names a retired image: it refuses new sessions for good."""

    code = "image_retired"


class CatalogInvalid(ImageError):
    code = "catalog_invalid"


class CatalogImageNotFound(ImageError, LookupError):
    """An operator's request names an image version the catalog does not have."""

    code = "catalog_image_not_found"


class CatalogImageExists(ImageError):
    code = "catalog_image_exists"


class CatalogImageStateConflict(ImageError):
    """The change does not apply to the image's state (e.g. building a retired one)."""

    code = "catalog_image_state_conflict"


class ImageBuildRunning(ImageError):
    code = "image_build_running"


class ImageBuildFailed(ImageError):
    code = "image_build_failed"


class ImageNameOutsideCatalog(ImageError):
    """A version to build names an image outside ``siesta-catalog/<id>:<tag>``: a build
    could then replace an image the deployment runs itself."""

    code = "image_name_outside_catalog"


class DockerfileNotAllowed(ImageError):
    """An inline Dockerfile uses an instruction the engine would carry out outside the
    build's confinement (``ADD`` fetches URLs from the engine's own network)."""

    code = "dockerfile_not_allowed"


class ProvisioningFailed(SiestaError):
    code = "provisioning_failed"


class ProvisioningTimeout(ProvisioningFailed, TimeoutError):
    code = "provisioning_timeout"


class ProviderUnavailable(SiestaError, ConnectionError):
    code = "provider_unavailable"


class WorkspaceError(SiestaError):
    code = "workspace_error"


class InvalidPath(WorkspaceError, ValueError):
    code = "invalid_path"


class PathOutsideWorkspace(WorkspaceError, PermissionError):
    code = "path_outside_workspace"


class FileMissing(WorkspaceError, FileNotFoundError):
    code = "file_not_found"


class NotAFile(WorkspaceError, IsADirectoryError):
    code = "not_a_file"


class NotADirectory(WorkspaceError, NotADirectoryError):
    code = "not_a_directory"


class TransferTooLarge(SiestaError):
    code = "transfer_too_large"


class MissingInput(SiestaError, LookupError):
    code = "missing_input"


class SessionBusy(SiestaError):
    code = "session_busy"


class InvalidIdempotencyKey(InvalidRequest):
    code = "invalid_idempotency_key"


class InvalidHeader(InvalidRequest):
    """A header whose bytes cannot be what it names (a token that is not ASCII)."""

    code = "invalid_header"


class OffsetPastEnd(SiestaError):
    """A page asked for past the end of the file as it is now (``offset``, ``size``)."""

    code = "offset_past_end"


class IdempotencyKeyReused(SiestaError):
    """A conflict with the state an earlier request left: its key is this one."""

    code = "idempotency_key_reused"


class IdempotentResultNotKept(SiestaError):
    """The key's first request ran, but its answer was too large (or streamed
    without a result) to keep: it is not run again."""

    code = "idempotency_result_not_kept"


class OutcomeUnknown(SiestaError):
    """A retry of a call whose first run was handed to the sandbox by an instance that
    died: the sandbox no longer knows how that run ended, so it is not run again."""

    code = "outcome_unknown"


class LeaseExpired(SiestaError):
    code = "lease_expired"


class CapacityUnavailable(SiestaError):
    code = "capacity_unavailable"


class StateUnavailable(SiestaError, ConnectionError):
    code = "state_unavailable"


class StoreSchemaTooNew(StateUnavailable):
    """The store was migrated by a newer release than this code: refused at start,
    since this code cannot know what the newer schema means (stores only go forward)."""


class ConfigurationError(SiestaError, ValueError):
    code = "configuration_error"


class SnapshotsNotSupported(SiestaError):
    """The provider cannot snapshot sandboxes (Kubernetes, here)."""

    code = "snapshots_not_supported"


class SnapshotMemoryNotSupported(SnapshotsNotSupported):
    """A snapshot or fork that keeps memory and processes, where the provider keeps
    files only; ``reason`` says why."""

    code = "snapshot_memory_not_supported"


class MetricsNotSupported(SiestaError):
    """The provider cannot read a sandbox's usage from outside it (Kubernetes, here:
    no metrics API is wired)."""

    code = "metrics_not_supported"


class ResumeTimeout(SiestaError, TimeoutError):
    code = "resume_timeout"


class SandboxUnavailable(ProviderUnavailable):
    code = "sandbox_unavailable"


class SandboxBroken(SandboxUnavailable):
    """The sandbox exists but cannot be started any more (its image or writable layer is
    gone): the session manager makes it again on the same workspace."""

    code = "sandbox_broken"


class JsUnavailable(SiestaError):
    code = "js_unavailable"


class Cancelled(SiestaError):
    code = "cancelled"


class ToolError(SiestaError):
    code = "tool_error"


class FunctionNotAvailable(ToolError):
    code = "function_not_available"


class ApprovalRequired(ToolError):
    code = "approval_required"


class ApprovalDenied(ToolError):
    code = "approval_denied"


class ApprovalAlreadyDecided(ToolError):
    code = "approval_already_decided"


class ApprovalExpired(ToolError):
    code = "approval_expired"


class ApprovalCancelled(ToolError):
    """The call waited for approval, or was approved but had not started, when its
    conversation was deleted: it never runs."""

    code = "approval_cancelled"


class ToolNotConfigured(ToolError):
    code = "tool_not_configured"


class ToolFailed(ToolError):
    code = "tool_failed"


class SubAgentNotAllowed(ToolError, PermissionError):
    """A name that is not one of the calling agent's configured sub-agents."""

    code = "sub_agent_not_allowed"


class ProviderFailed(ToolError):
    code = "provider_failed"


class CrawlTimeout(ToolError, TimeoutError):
    code = "crawl_timeout"


class FetchFailed(ToolError):
    code = "fetch_failed"


class UrlNotAllowed(FetchFailed):
    code = "url_not_allowed"


# Codes of a JavaScript script's failure (a result's ``error.code``, not an exception).
JS_SYNTAX_ERROR = "js_syntax_error"
JS_ERROR = "js_error"
JS_TIMEOUT = "js_timeout"
JS_MEMORY_LIMIT = "js_memory_limit"
JS_CRASHED = "js_crashed"
JS_ASYNC_NOT_SUPPORTED = "js_async_not_supported"
"""The script uses ``async`` / ``await`` or its final value is a Promise (or thenable)."""
