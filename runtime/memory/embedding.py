"""Embeddings for ``search_memory``, computed here, offline, or none at all.

The model (``wordllama.py``) is loaded on first use, once per process, under a lock:
a service that never searches memory never pays its load (about a second) or its
memory (about 40 MB). When it cannot be loaded (the package missing or broken), the
failure is logged once and searches rank lexically (``lexical.py``), saying so.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

log = logging.getLogger(__name__)


class Model(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> list[bytes]: ...

    def similarities(self, query: str, vectors: Sequence[bytes]) -> list[float]: ...


@functools.cache  # once per process, whatever number of services it builds (tests)
def load_wordllama() -> Model:
    from runtime.memory.wordllama import WordLlamaModel

    return WordLlamaModel()


class Embedder:
    """The model, loaded lazily; ``model()`` is ``None`` when it cannot be."""

    def __init__(self, loader: Callable[[], Model] = load_wordllama) -> None:
        self._loader = loader
        self._lock = threading.Lock()
        self._model: Model | None = None
        self.failure: str | None = None
        """Why the model could not be loaded (``None``: loaded, or not tried yet)."""

    def model(self) -> Model | None:
        if self._model is None and self.failure is None:
            with self._lock:
                if self._model is None and self.failure is None:
                    self._load()
        return self._model

    def _load(self) -> None:
        try:
            self._model = self._loader()
        except Exception as exc:  # ImportError, a missing file, a broken wheel: all alike
            self.failure = f"the embedding model could not be loaded ({exc})"
            log.warning("memory search falls back to lexical ranking: %s", self.failure)
