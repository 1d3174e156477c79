"""Turns at making sandboxes: a few at once, first come first served.

Making a sandbox is CPU-bound work for the engine (and for the disks' tools). Left
to themselves, a burst of fifty first operations starts fifty creations at once and
every one of them finishes late; taken in turns, the first finish early and the
engine never thrashes. So this instance makes at most ``concurrency`` sandboxes at
a time, for first operations and pool refills together:

- a first operation waits for its turn in arrival order (``turn``); when
  ``queue_limit`` already wait, it is refused with ``capacity_unavailable`` naming
  the limit, never left to time out;
- a pool refill takes a turn only when it is free and nobody waits
  (``try_idle_turn``): refills never delay a conversation waiting for its sandbox.

The provisioning timeout starts once the turn is taken: waiting behind others is
not a slow engine.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Iterator

from runtime.core import metrics
from runtime.core.errors import CapacityUnavailable


class MakeGate:
    def __init__(self, concurrency: int, queue_limit: int) -> None:
        self._concurrency = concurrency
        self._queue_limit = queue_limit
        self._free = concurrency
        self._waiting: collections.deque[object] = collections.deque()
        self._changed = threading.Condition()
        self._first_operations = 0
        """First operations holding a turn now."""
        self._last_first_operation = float("-inf")
        """When the last of them gave its turn back (monotonic)."""

    @property
    def concurrency(self) -> int:
        return self._concurrency

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Hold one of the turns for a first operation, waiting behind those before it."""
        self._take()
        try:
            yield
        finally:
            with self._changed:
                self._first_operations -= 1
                self._last_first_operation = time.monotonic()
            self.release()

    def try_idle_turn(self) -> bool:
        """Take a turn for a refill if one is free and no first operation waits; the
        caller must ``release`` it."""
        with self._changed:
            if self._waiting or self._free == 0:
                return False
            self._free -= 1
            return True

    def release(self) -> None:
        with self._changed:
            self._free += 1
            self._changed.notify_all()

    def quiet_for(self) -> float:
        """Seconds since the last first operation had its sandbox made (0 while one
        waits or is being served): refills above the low-water mark run in the gaps."""
        with self._changed:
            if self._waiting or self._first_operations:
                return 0.0
            return time.monotonic() - self._last_first_operation

    def _take(self) -> None:
        started = time.monotonic()
        with self._changed:
            if self._waiting or self._free == 0:
                if len(self._waiting) >= self._queue_limit:
                    metrics.PROVISION_QUEUE_REFUSALS.inc()
                    msg = (
                        f"{len(self._waiting)} new sandboxes are already waiting to be made "
                        f"on this instance, the queue limit of {self._queue_limit} "
                        "(SIESTA_PROVISION__QUEUE_LIMIT); try again shortly"
                    )
                    raise CapacityUnavailable(
                        msg, scope="queue", limit=self._queue_limit, unit="sandboxes"
                    )
                ticket = object()
                self._waiting.append(ticket)
                metrics.PROVISION_QUEUE.set(len(self._waiting))
                try:
                    while self._waiting[0] is not ticket or self._free == 0:
                        self._changed.wait()
                finally:
                    self._waiting.remove(ticket)
                    metrics.PROVISION_QUEUE.set(len(self._waiting))
                    self._changed.notify_all()  # the next in line may go too
            self._free -= 1
            self._first_operations += 1
        metrics.PROVISION_QUEUE_SECONDS.observe(time.monotonic() - started)
