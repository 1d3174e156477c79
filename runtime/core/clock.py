"""Time for code that waits: injectable, so tests step it instead of sleeping.

``now()`` is monotonic seconds; ``wait(event, seconds)`` blocks until the event
is set or that much time has passed on this clock (``True`` when set).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Until ``event`` is set (``True``) or ``seconds`` passed (``False``)."""


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(seconds)


SYSTEM_CLOCK = SystemClock()
