"""Errors of Siesta Runtime: one root, stable machine codes.

Every error carries a ``code`` (snake_case, part of the API: clients and agents
branch on it) and structured ``fields`` such as ``limit`` or ``path``. Errors
caused by a limit always carry the limit in force, because agents are told to
trust that value.

    SiestaError
    ├── InvalidRequest                 invalid_request / invalid_json / invalid_command /
    │                                  invalid_conversation_id / missing_context
    │   └── CommandTooLarge            command_too_large (limit)
    ├── RequestTooLarge                request_too_large (limit)
    ├── Unauthorized                   unauthorized
    ├── NotFound                       not_found
    ├── SandboxDisabled                sandbox_disabled
    ├── ImageError
    │   ├── ImageRequired              image_required
    │   ├── ImageNotInCatalog          image_not_in_catalog (imageId)
    │   └── ImageUnavailable           image_unavailable (imageId, imageRef)
    ├── ProvisioningFailed             provisioning_failed
    │   └── ProvisioningTimeout        provisioning_timeout (limit)
    ├── ProviderUnavailable            provider_unavailable
    │   └── SandboxUnavailable         sandbox_unavailable
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
    ├── LeaseExpired                   lease_expired (limit: lease TTL)
    ├── CapacityUnavailable            capacity_unavailable (scope, limit)
    ├── StateUnavailable               state_unavailable
    └── ConfigurationError             configuration_error

A command that exits nonzero or times out is *not* an error: it is a result
with ``exitCode`` and ``timedOut``.
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


class CommandTooLarge(InvalidRequest):
    code = "command_too_large"


class RequestTooLarge(SiestaError):
    code = "request_too_large"


class Unauthorized(SiestaError):
    code = "unauthorized"


class NotFound(SiestaError, LookupError):
    code = "not_found"


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


class LeaseExpired(SiestaError):
    code = "lease_expired"


class CapacityUnavailable(SiestaError):
    code = "capacity_unavailable"


class StateUnavailable(SiestaError, ConnectionError):
    code = "state_unavailable"


class ConfigurationError(SiestaError, ValueError):
    code = "configuration_error"


class ResumeTimeout(SiestaError, TimeoutError):
    code = "resume_timeout"


class SandboxUnavailable(ProviderUnavailable):
    code = "sandbox_unavailable"
