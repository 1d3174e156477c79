"""Tool Executions: what the log shows of a call's arguments, and how long it keeps them.

The log itself is a store concern (``runtime/store/``: ``ExecutionStore``). The
arguments are stored redacted for the log; the exact arguments of a call that
waits for approval are kept apart, only until it is decided or expires, and then
both are deleted. Entries older than the retention are removed by the sweep.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.seams.stores import ExecutionStore
from runtime.tools.settings import ToolSettings

DAY_SECONDS = 24 * 3600

SECRET_KEY = re.compile(
    r"pass(word)?|secret|token|api[_-]?key|authori[sz]ation|credential|"
    r"cookie|private[_-]?key",
    re.IGNORECASE,
)
REDACTED = "[redacted]"


LOG_TEXT_CHARS = 4096
"""Longest text the log keeps of one value (a written file's content, a command's
output): the log is for inspecting a call, the workspace keeps the data."""


def redact(value: Any) -> Any:
    """A copy for the log: values of secret-looking keys replaced and long texts cut
    (saying how long they were), at any depth."""
    if isinstance(value, dict):
        return {
            key: REDACTED if SECRET_KEY.search(str(key)) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, str) and len(value) > LOG_TEXT_CHARS:
        return f"{value[:LOG_TEXT_CHARS]}… [cut in the log: {len(value)} characters]"
    return value


@dataclass(frozen=True)
class SweepResult:
    expired: list[str]
    """Ids of the approvals that expired in this sweep."""
    removed: int
    """Entries removed for being older than the retention."""


class ExecutionsSweep:
    """Expires approvals past their deadline (they also expire lazily, when read or
    decided) and removes entries past the retention; run by each reconciliation pass
    (a ``runtime.sessions.reconcile.Sweep``)."""

    name = "executions log"

    def __init__(
        self, log: ExecutionStore, settings: ToolSettings, clock: Callable[[], float] = time.time
    ) -> None:
        self._log = log
        self._settings = settings
        self._clock = clock

    def run(self) -> dict[str, list[str]]:
        result = self.sweep()
        removed = [str(result.removed)] if result.removed else []
        return {"approvals_expired": result.expired, "executions_removed": removed}

    def sweep(self) -> SweepResult:
        now = self._clock()
        expired = [execution.id for execution in self._log.expire_pending(now)]
        cutoff = now - self._settings.executions_retention_days * DAY_SECONDS
        return SweepResult(expired, self._log.remove_older_than(cutoff))
