"""When and how long to wait before sending a request again."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx

RETRYABLE_STATUSES = frozenset({502, 503})
"""The service (or its proxy) says it did nothing and to try again. 504 is not:
the call may still be running (an idempotent retry would then wait for it, but
provisioning timeouts are the caller's to handle)."""


@dataclass(frozen=True)
class Retries:
    """Bounded retries with exponential backoff. Mutating calls carry one
    ``Idempotency-Key`` for all their attempts, so a retry never runs twice what the
    first attempt ran: it gets the first attempt's answer."""

    attempts: int = 4
    """Tries in all (1: no retry)."""
    backoff_seconds: float = 0.25
    """Wait before the second try; doubled for each next one."""
    max_backoff_seconds: float = 4.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        wait = min(self.backoff_seconds * 2.0 ** (attempt - 1), self.max_backoff_seconds)
        after = response.headers.get("retry-after", "") if response is not None else ""
        if after.isdigit():
            wait = max(wait, min(float(after), self.max_backoff_seconds))
        return wait


def new_key() -> str:
    return f"siesta-client-{uuid.uuid4().hex}"


def retryable(error: Exception) -> bool:
    """Connection-level failures: the request may or may not have reached the service."""
    return isinstance(error, httpx.TransportError)
