"""Tool Executions: what the log shows of a call's arguments.

The log itself is a store concern (``runtime/store/``: ``ExecutionStore``). The
arguments are stored redacted for the log; the exact arguments of a call that
waits for approval are kept apart, only until it is decided.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_KEY = re.compile(
    r"pass(word)?|secret|token|api[_-]?key|authori[sz]ation|credential|"
    r"cookie|private[_-]?key",
    re.IGNORECASE,
)
REDACTED = "[redacted]"


def redact(value: Any) -> Any:
    """A copy with the values of secret-looking keys replaced, at any depth."""
    if isinstance(value, dict):
        return {
            key: REDACTED if SECRET_KEY.search(str(key)) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value
