"""Sends that make no progress: one thread for every agent channel of the process gives
up a channel whose send has waited longer than its ``stall_seconds`` (a frozen agent
stops reading its stdin; without this the caller would wait in ``sendall`` forever)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Protocol


class Watched(Protocol):
    """A channel whose sends are watched (``AgentChannel``)."""

    stall_seconds: float | None

    def give_up_sending(self) -> None:
        """Close the channel: the blocked send wakes with an error."""


class SendWatch:
    """One thread for every channel of the process: gives up a channel whose send has
    made no progress for its ``stall_seconds`` (a frozen agent stops reading; without
    this the caller would wait in ``sendall`` forever). Sends cost a dict entry."""

    def __init__(self) -> None:
        self._sending: dict[Watched, float] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watching(self, channel: Watched) -> Iterator[None]:
        if channel.stall_seconds is None:
            yield
            return
        with self._lock:
            self._sending[channel] = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="agent-sends", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._sending.pop(channel, None)

    def _watch(self) -> None:
        while True:
            time.sleep(SEND_WATCH_TICK)
            now = time.monotonic()
            with self._lock:
                stalled = [
                    channel
                    for channel, since in self._sending.items()
                    if channel.stall_seconds is not None and now - since > channel.stall_seconds
                ]
            for channel in stalled:
                channel.give_up_sending()


SEND_WATCH_TICK = 0.25
SEND_WATCH = SendWatch()
"""The process's one watch (its thread starts with the first watched send)."""
