"""A request's frames on their way from a channel's reader thread to the request's
thread, bounded: past ``INBOX_BYTES`` the reader waits, and with it the agent
(its stdout blocks), rather than the service holding whatever the agent sends.
"""

from __future__ import annotations

import collections
import queue
import threading

from runtime.providers.agent.protocol import Frame

INBOX_BYTES = 8 * 1024 * 1024
"""A request's frames not yet taken by its thread."""
FRAME_COST = 128
"""What a queued frame costs beyond its payload (the objects around it)."""


class Inbox:
    """One request's frames on their way from the reader to its thread.

    Holds at most ``INBOX_BYTES`` (and always one frame): ``put`` waits for room
    until the request takes frames, ends (``abandon``) or its channel closes. The
    end of the channel (``None``) always gets in."""

    def __init__(self, closed: threading.Event) -> None:
        self._closed = closed
        self._frames: collections.deque[Frame | None] = collections.deque()
        self._bytes = 0
        self._changed = threading.Condition()
        self._abandoned = False

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def put(self, frame: Frame | None) -> None:
        size = 0 if frame is None else len(frame.payload) + FRAME_COST
        with self._changed:
            while (
                frame is not None
                and self._frames
                and self._bytes + size > INBOX_BYTES
                and not self._abandoned
                and not self._closed.is_set()
            ):
                self._changed.wait()
            if self._abandoned or (frame is not None and self._closed.is_set()):
                return
            self._frames.append(frame)
            self._bytes += size
            self._changed.notify_all()

    def get(self, timeout: float | None = None) -> Frame | None:
        """The next frame; ``queue.Empty`` when none came within ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._frames, timeout):
                raise queue.Empty
            frame = self._frames.popleft()
            if frame is not None:
                self._bytes -= len(frame.payload) + FRAME_COST
            self._changed.notify_all()
            return frame

    def abandon(self) -> None:
        """The request is over: drop what it did not take, take nothing more."""
        with self._changed:
            self._abandoned = True
            self._frames.clear()
            self._bytes = 0
            self._changed.notify_all()

    def wake(self) -> None:
        """Its channel closed: a ``put`` waiting for room gives up."""
        with self._changed:
            self._changed.notify_all()
