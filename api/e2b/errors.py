"""Errors in E2B's shape: ``{"code": <HTTP status>, "message": ...}``.

The SDKs read that body on every error status (a ``{"detail"}`` or an HTML page
crashes them), pick their exception by the status, and retry 429, 502, 503 and
504 unless ``Should-Retry: false`` says not to.
"""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from api.errors import status_for
from runtime.core.errors import SiestaError

log = logging.getLogger(__name__)

E2B_STATUS_BY_CODE = {
    # E2B's concurrency limit is a 429 (RateLimitException); retrying it in a
    # tight loop only adds load, so it is marked not to be retried.
    "capacity_unavailable": 429,
    "template_not_found": 404,
    "sandbox_not_found": 404,
    "process_not_found": 404,
    "too_many_processes": 429,
    "unknown_user": 401,
    "permission_denied": 403,
    "approval_required": 403,  # a 202 would read as done: the message names the approval
    "not_enough_space": 507,
    "not_a_file": 400,
    "invalid_metadata": 400,  # envd's answer to metadata it cannot keep
    "metadata_too_large": 400,
    "snapshot_memory_not_supported": 400,  # E2B's answer for a snapshot mode refused
}
NOT_RETRIED = {429}


class E2bRefusal(Exception):
    """An answer of the E2B routes themselves (a bad body, a missing key)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def refuse(status: int, message: str) -> E2bRefusal:
    return E2bRefusal(status, message)


def status_of(exc: Exception) -> int:
    if isinstance(exc, E2bRefusal):
        return exc.status
    if isinstance(exc, SiestaError):
        return E2B_STATUS_BY_CODE.get(exc.code) or status_for(exc)
    return 500


def e2b_error(exc: Exception) -> JSONResponse:
    status = status_of(exc)
    if status >= 500 and not isinstance(exc, SiestaError | E2bRefusal):
        log.exception("e2b call failed", exc_info=exc)
        message = "internal error"
    else:
        message = str(exc)
    headers = {"Should-Retry": "false"} if status in NOT_RETRIED else {}
    return JSONResponse({"code": status, "message": message}, status_code=status, headers=headers)
