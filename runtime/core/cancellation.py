"""A caller's way to stop an operation it no longer waits for (the HTTP client
went away): what can be stopped registers how, for as long as it runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class Cancellation:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    @contextlib.contextmanager
    def on_cancel(self, hook: Callable[[], None]) -> Iterator[None]:
        """Run ``hook`` if cancelled while the block runs (at once if already cancelled)."""
        with self._lock:
            already = self._cancelled
            if not already:
                self._hooks.append(hook)
        if already:
            hook()
        try:
            yield
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._hooks.remove(hook)
