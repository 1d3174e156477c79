"""A clock that moves only when a test says so, for code that waits (``runtime.core.clock``).

Threads that ``wait`` on it block until the test ``advance``s past their deadline
(or their event is set); ``settle`` waits until every such thread is blocked
again, so a test can step time and then look, with no sleeps and no windows.
"""

from __future__ import annotations

import threading
import time


class ManualClock:
    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._changed = threading.Condition()
        self._deadlines: dict[int, float] = {}
        """Per waiting call: when it is due to wake."""

    def now(self) -> float:
        with self._changed:
            return self._now

    def time(self) -> float:
        """The same clock as wall time, for stores that take ``time.time``."""
        return self.now()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        token = object()
        with self._changed:
            deadline = self._now + seconds
            self._deadlines[id(token)] = deadline
            self._changed.notify_all()
            try:
                while not event.is_set() and self._now < deadline:
                    # The event is set from outside this condition: look every few ms.
                    self._changed.wait(0.005)
            finally:
                del self._deadlines[id(token)]
                self._changed.notify_all()
            return event.is_set()

    def advance(self, seconds: float) -> None:
        with self._changed:
            self._now += seconds
            self._changed.notify_all()

    def settle(self, sleepers: int, timeout: float = 10.0) -> None:
        """Until ``sleepers`` threads wait on a deadline still ahead (each has done
        what the last ``advance`` woke it for). Fails after ``timeout`` real seconds."""
        limit = time.monotonic() + timeout
        with self._changed:
            while True:
                ahead = [d for d in self._deadlines.values() if d > self._now]
                if len(ahead) >= sleepers and len(ahead) == len(self._deadlines):
                    return
                if time.monotonic() > limit:
                    msg = f"{len(ahead)} of {sleepers} waiting threads settled"
                    raise TimeoutError(msg)
                self._changed.wait(0.005)
