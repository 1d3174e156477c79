"""JsExecutorAgent: synchronous JavaScript with the helpers of the reference."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from siesta_contract.base import Arguments, Result
from siesta_contract.text import NON_BLANK_TEXT


class JsArgs(Arguments):
    code: str = Field(
        description="JavaScript source; the final expression is the result",
        json_schema_extra={"minLength": 1, "pattern": NON_BLANK_TEXT},
    )


class RunScriptBody(JsArgs):
    """The HTTP route's body: the function's arguments plus a per-call timeout."""

    timeoutSeconds: float | None = Field(
        None, gt=0, description="Wall-clock limit; capped by the deployment's"
    )


class JsError(Result):
    model_config = ConfigDict(extra="allow")

    code: str
    """``js_syntax_error``, ``js_error``, ``js_timeout``, ``js_memory_limit``, ``js_crashed``,
    ``js_async_not_supported`` (``async``/``await`` used, or the final value is a Promise).
    A ``js_error`` thrown by a helper carries the helper's code as ``helperCode``
    (e.g. ``sub_agent_not_allowed``)."""
    message: str


class JsResult(Result):
    """A script's outcome. A script that failed is a result too (the model reads it)."""

    result: str | None = None
    """The final expression (JSON for objects and arrays); absent when ``error`` is set."""
    error: JsError | None = None
    logs: list[str]
    statuses: list[str]
    truncated: dict[str, Any]
    """What was cut, with the limits in force (logs, statuses, result)."""
    durationMs: int
