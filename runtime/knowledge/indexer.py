"""The background indexer: one thread per instance taking waiting documents from the
store (``Indexing.next``) until there are none, then looking again every
``SIESTA_KNOWLEDGE__INDEXER_POLL_SECONDS``. Requests never wait for it. Several
instances index side by side: the store gives each version to one of them, and takes
it again from one that died (``claim_stale_seconds``)."""

from __future__ import annotations

import logging
import threading

from runtime.core.errors import StateUnavailable
from runtime.knowledge.documents import Indexing

log = logging.getLogger(__name__)


class Indexer:
    def __init__(self, indexing: Indexing, poll_seconds: float) -> None:
        self._indexing = indexing
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="knowledge-indexer", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """A document was added: look now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                done = self._indexing.next()
            except StateUnavailable as exc:  # the store is down: try again later
                log.warning("knowledge indexer: the store cannot be read (%s)", exc)
                done = None
            except Exception:
                log.exception("knowledge indexer: a step failed")
                done = None
            if done is not None:
                log.info(
                    "knowledge version %s of %s: %s (%d passages)",
                    done.version_id,
                    done.base_id,
                    done.status,
                    done.chunks,
                )
                continue
            self._wake.wait(self._poll)
            self._wake.clear()
