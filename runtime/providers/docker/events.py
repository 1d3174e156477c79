"""What the engine says happens to our containers, so an open channel is not trusted blindly.

An open agent channel says the container has not stopped (the attach stream ends
when it does), but not that it is not frozen: a container paused by hand, or by
anything else, keeps its stream open while its agent answers nothing. The session
manager's fast path (``known_running``: use the sandbox without asking the engine)
is therefore allowed only for sandboxes the engine said were running *and* that no
event has touched since: this module follows the engine's event stream for the
deployment's containers and forgets a sandbox at its first event that could mean
it no longer runs (pause, die, kill, stop, OOM, restart, update, destroy).

While the stream is down (the engine restarts, say) nothing is trusted: every
operation asks the engine. A new stream starts a new epoch, so nothing trusted
before the gap is trusted after it. Losing the stream also drops the client's
pooled connections, which an engine restart leaves dead.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import docker
import requests.exceptions

log = logging.getLogger(__name__)

UNTRUSTING_ACTIONS = frozenset(
    {"pause", "die", "kill", "stop", "oom", "restart", "update", "destroy", "rename"}
)
"""Container events after which the sandbox may not be running (unfrozen) any more."""
RECONNECT_SECONDS = (0.1, 0.5, 1.0, 2.0)
"""Waits between attempts to follow the events again (the last one repeats)."""


class EngineEvents:
    """Trust in "this sandbox runs", kept only while the engine's events agree."""

    def __init__(
        self,
        api: docker.APIClient,
        filters: dict[str, Any],
        on_lost_stream: Callable[[], None] = lambda: None,
    ) -> None:
        self._api = api
        self._filters = {**filters, "type": "container"}
        self._on_lost_stream = on_lost_stream
        self._lock = threading.Lock()
        self._epoch = 0
        """Counts the streams followed; 0 (or an odd gap) while none is."""
        self._following = False
        self._events_seen: dict[str, int] = {}
        self._trusted: dict[str, int] = {}
        self._closed = threading.Event()
        self._stream: Any = None
        self._thread = threading.Thread(target=self._follow, name="docker-events", daemon=True)
        self._thread.start()

    def snapshot(self, sandbox_id: str) -> tuple[int, int] | None:
        """Taken before asking the engine about a sandbox: ``None`` while no stream is
        followed (then nothing can be trusted)."""
        with self._lock:
            if not self._following:
                return None
            return self._epoch, self._events_seen.get(sandbox_id, 0)

    def trust(self, sandbox_id: str, snapshot: tuple[int, int] | None) -> None:
        """The engine said the sandbox runs: trust that, unless an event about it (or a
        gap in the stream) came since ``snapshot``."""
        if snapshot is None:
            return
        with self._lock:
            if self._following and snapshot == (
                self._epoch,
                self._events_seen.get(sandbox_id, 0),
            ):
                self._trusted[sandbox_id] = self._epoch

    def trusted(self, sandbox_id: str) -> bool:
        with self._lock:
            return self._following and self._trusted.get(sandbox_id) == self._epoch

    def forget(self, sandbox_id: str) -> None:
        with self._lock:
            self._trusted.pop(sandbox_id, None)
            self._events_seen.pop(sandbox_id, None)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(Exception):
            if self._stream is not None:
                self._stream.close()

    # -- the stream ----------------------------------------------------------------------

    def _follow(self) -> None:
        attempt = 0
        while not self._closed.is_set():
            try:
                self._stream = self._api.events(decode=True, filters=self._filters)
                with self._lock:
                    self._epoch += 1
                    self._following = True
                    self._trusted.clear()
                attempt = 0
                for event in self._stream:
                    self._see(event)
            except (requests.exceptions.RequestException, docker.errors.DockerException, OSError):
                pass  # the engine went away (or is not back yet): try again below
            except Exception:  # a malformed event must not end the watch for good
                log.warning("following the Docker engine's events failed", exc_info=True)
            with self._lock:
                was_following, self._following = self._following, False
                self._trusted.clear()
            if was_following and not self._closed.is_set():
                log.info("lost the Docker engine's events; asking the engine until they are back")
                self._on_lost_stream()
            wait = RECONNECT_SECONDS[min(attempt, len(RECONNECT_SECONDS) - 1)]
            attempt += 1
            self._closed.wait(wait)

    def _see(self, event: dict[str, Any]) -> None:
        action = str(event.get("Action") or event.get("status") or "").split(":", 1)[0]
        if action not in UNTRUSTING_ACTIONS:
            return
        name = str(((event.get("Actor") or {}).get("Attributes") or {}).get("name") or "")
        if not name:
            return
        with self._lock:
            self._events_seen[name] = self._events_seen.get(name, 0) + 1
            self._trusted.pop(name, None)
