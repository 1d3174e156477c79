"""The error body every failure has, and the error responses routes declare.

Each status lists the codes that can come with it (from ``errors.STATUS_BY_CODE``),
so the OpenAPI document says what a client must handle.
"""

from __future__ import annotations

from typing import Any

from siesta_contract.errors import ErrorResponse

from api.errors import STATUS_BY_CODE

REASONS = {
    202: "Held: the function's policy asks a person first (`approvalId`: decide it with "
    "`POST /v1/tools/approvals/{id}`; the result is in the decision's answer and the "
    "executions log)",
    400: "Bad context headers or JSON",
    401: "Missing or wrong bearer token",
    403: "Not allowed: the token lacks the route's scope (`scope` names it), the "
    "deployment does not allow it, or the sandbox's user may not touch the path",
    404: "No such resource (or another org's)",
    405: "Method not allowed (the Allow header lists the methods)",
    409: "The conversation or the approval is busy or decided, what is at a path is not "
    "what the call needs, or the `Idempotency-Key` came with another request",
    410: "The approval expired before it was decided (`limit`: the approval TTL), or was "
    "cancelled because its conversation was deleted",
    413: "Over a size limit (the error says which, with `limit`)",
    422: "Invalid arguments (the error's `problems` or `code` says which)",
    500: "Internal error (a bug; the body never carries a traceback)",
    501: "The deployment's provider cannot do this (snapshots on Kubernetes)",
    502: "A sandbox's port: nothing listens on it, or its server broke off the connection",
    503: "A dependency is unavailable or a capacity limit is reached; try again",
    504: "Provisioning or resuming took longer than its limit",
    507: "The sandbox's disk is full",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"model": ErrorResponse, "description": describe(status)} for status in statuses
    }


def describe(status: int) -> str:
    """The status's reason, with the error codes that come with it."""
    codes = sorted(code for code, mapped in STATUS_BY_CODE.items() if mapped == status)
    reason = REASONS.get(status, "Error")
    return f"{reason}. Codes: {', '.join(codes)}" if codes else reason


COMMON = (400, 401, 403, 413, 422, 500, 503)
"""What any authenticated route can answer: bad JSON or context, auth (a token
without the route's scope is 403), body size, validation, bugs, and the state
store being unavailable."""
CONVERSATION = COMMON
AGENT_FUNCTION = (*CONVERSATION, 202)
"""A function the agent calls on a direct route: its policy may hold it for approval."""
SANDBOX = (*AGENT_FUNCTION, 404, 409, 504)
"""Sandbox functions add everything a sandbox operation can meet."""
