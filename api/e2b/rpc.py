"""What envd's Connect services share: one mapping of our errors to Connect codes (the
SDKs branch on them: NOT_FOUND is "does not exist", ALREADY_EXISTS "was there
already", UNAVAILABLE "not running"), and blocking work run off the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from anyio import to_thread
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from runtime.core.errors import NotFound, SiestaError

T = TypeVar("T")
CODES = {
    "file_not_found": Code.NOT_FOUND,
    "already_exists": Code.ALREADY_EXISTS,
    "permission_denied": Code.PERMISSION_DENIED,
    "file_operation_failed": Code.FAILED_PRECONDITION,
    "unknown_user": Code.UNAUTHENTICATED,
    "too_many_processes": Code.RESOURCE_EXHAUSTED,
    "transfer_too_large": Code.RESOURCE_EXHAUSTED,
    "capacity_unavailable": Code.UNAVAILABLE,
    "sandbox_unavailable": Code.UNAVAILABLE,
    "provider_unavailable": Code.UNAVAILABLE,
    "session_busy": Code.ABORTED,
    "lease_expired": Code.ABORTED,
    "function_not_available": Code.PERMISSION_DENIED,
    "approval_required": Code.FAILED_PRECONDITION,  # the message names the approval
}


def connect_error(exc: SiestaError) -> ConnectError:
    code = CODES.get(exc.code) or (Code.NOT_FOUND if isinstance(exc, NotFound) else None)
    return ConnectError(code or Code.INVALID_ARGUMENT, str(exc))


async def in_thread(run: Callable[[], T]) -> T:
    """``run`` on a worker thread, its error as the Connect error the SDKs expect."""
    try:
        return await to_thread.run_sync(run)
    except SiestaError as exc:
        raise connect_error(exc) from exc
