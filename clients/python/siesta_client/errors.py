"""The service's error codes as exceptions.

SiestaError                  any ``{"error": {...}}`` answer (code, message, status, fields)
├── ConnectionFailed         no answer after every retry (connection_failed)
├── ClientTimeout            the client stopped waiting (client_timeout); also a TimeoutError
├── InvalidRequest           400 / 422: bad arguments, context or key
├── Unauthorized             401
├── Forbidden                403 (forbidden_scope, sandbox_disabled, ...)
├── NotFound                 404 (not_found, file_not_found, ...)
├── Conflict                 409
│   ├── SessionBusy          session_busy (limit: seconds waited)
│   ├── IdempotencyKeyReused idempotency_key_reused (the key came with another request)
│   └── OutcomeUnknown       outcome_unknown (a keyed call whose first run's instance died)
├── ApprovalRequired         approval_required (202: approval_id)
├── LimitError               any other error that states a ``limit`` (and ``unit``)
└── Unavailable              503 / 504: try again later
"""

from __future__ import annotations

from typing import Any


class SiestaError(Exception):
    """An error answer. ``code`` is the service's stable code; limit errors carry
    ``limit`` and ``unit``; every other field of the answer is in ``fields``."""

    def __init__(
        self, message: str, *, code: str, status: int, fields: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.fields = fields or {}

    @property
    def limit(self) -> Any:
        return self.fields.get("limit")

    @property
    def unit(self) -> str | None:
        unit = self.fields.get("unit")
        return str(unit) if unit is not None else None


class ConnectionFailed(SiestaError):
    """The service did not answer (connection errors or 503) after every retry."""


class ClientTimeout(SiestaError, TimeoutError):
    """No answer within the read timeout (``limit`` seconds): the client closed the
    connection. ``stopped``: the service stopped the call when its caller went away (a
    command's processes are killed; what it did until then stays in the workspace);
    otherwise the service finishes it, and it may still be running. Never retried."""

    @property
    def stopped(self) -> bool:
        return bool(self.fields.get("outcome") == "stopped")


class InvalidRequest(SiestaError):
    pass


class Unauthorized(SiestaError):
    pass


class Forbidden(SiestaError):
    pass


class NotFound(SiestaError):
    pass


class Conflict(SiestaError):
    pass


class SessionBusy(Conflict):
    pass


class IdempotencyKeyReused(Conflict):
    """The key came with another request (method, path or body): a new call needs a
    new key."""


class OutcomeUnknown(Conflict):
    """A retry of a call whose first run was started by an instance that died, and whose
    outcome nobody knows any more: it was not run again. Look at its effects; a new
    ``Idempotency-Key`` runs it again."""


class ApprovalRequired(SiestaError):
    """The deployment's policy holds the call until a person decides; decide it with
    ``client.tools.decide(approval_id, ...)``."""

    @property
    def approval_id(self) -> str:
        return str(self.fields.get("approvalId", ""))


class LimitError(SiestaError):
    pass


class Unavailable(SiestaError):
    pass


_BY_CODE: dict[str, type[SiestaError]] = {
    "approval_required": ApprovalRequired,
    "session_busy": SessionBusy,
    "outcome_unknown": OutcomeUnknown,
    "idempotency_key_reused": IdempotencyKeyReused,
}
_BY_STATUS: dict[int, type[SiestaError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: InvalidRequest,
    503: Unavailable,
    504: Unavailable,
}


def error_from(status: int, body: dict[str, Any]) -> SiestaError:
    """The exception for an answer's ``error`` object."""
    fields = dict(body)
    code = str(fields.pop("code", "error"))
    message = str(fields.pop("message", ""))
    cls = _BY_CODE.get(code)
    if cls is None and "limit" in fields:
        cls = LimitError
    if cls is None:
        cls = _BY_STATUS.get(status, SiestaError)
    return cls(message, code=code, status=status, fields=fields)
