"""A knowledge base's search index, in memory, built from its chunks in the store.

Two indexes over the same chunks: the vectors as one float32 matrix (a query is one
matrix-vector product; a large base's vectors are also clustered, and a query reads
only the nearest clusters: ``partitions.py``), and an inverted index of words for BM25 (the
formula of ``runtime/memory/lexical.py``, over postings, so a query touches only the
chunks holding its words). ``hybrid`` fuses the two rankings by reciprocal rank
(Cormack et al., k = 60): names and rare words that embeddings blur are caught by
BM25, paraphrases by the vectors. The store is read when the base's ``generation``
changed (``Indexes``), not per query.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from runtime.core.knowledge_records import KnowledgeChunk
from runtime.knowledge.partitions import Partitions
from runtime.memory.lexical import K1, B, terms

RRF_K = 60
CANDIDATES = 100
"""How many of each ranking the fusion looks at (more than any top_n asks: 200 is
covered by taking ``max(top_n, CANDIDATES)``)."""


@dataclass(frozen=True)
class Hit:
    position: int
    """The chunk's place in ``BaseIndex.chunks``."""
    score: float


class BaseIndex:
    def __init__(
        self, chunks: list[KnowledgeChunk], partition_from: int = 0, probes: int = 32
    ) -> None:
        """``partition_from``: from how many passages the vectors are searched in
        partitions (``partitions.py``) rather than all of them (0: never)."""
        self.chunks = chunks
        self.vectors = _matrix(chunks)
        self.partitions = (
            Partitions(self.vectors, probes)
            if self.vectors is not None and partition_from and len(chunks) >= partition_from
            else None
        )
        self._postings, self._lengths = _inverted(chunks)
        self._average = float(self._lengths.mean()) if len(chunks) else 1.0

    @property
    def semantic_ready(self) -> bool:
        return self.vectors is not None

    def semantic(self, query: np.ndarray, k: int, *, exact: bool = False) -> list[Hit]:
        """The ``k`` nearest passages: in the nearest partitions when the base is
        partitioned (``exact``: every vector, as a smaller base always is)."""
        if self.vectors is None or not self.chunks:
            return []
        if self.partitions is None or exact:
            return _top(self.vectors @ query, k)
        positions, scores = self.partitions.scores(query)
        return [Hit(int(positions[hit.position]), hit.score) for hit in _top(scores, k)]

    def lexical(self, query: str, k: int) -> list[Hit]:
        n = len(self.chunks)
        if not n:
            return []
        scores = np.zeros(n, dtype=np.float32)
        for term in set(terms(query)):
            posting = self._postings.get(term)
            if posting is None:
                continue
            positions, counts = posting
            idf = math.log(1 + (n - len(positions) + 0.5) / (len(positions) + 0.5))
            lengths = self._lengths[positions]
            norm = counts + K1 * (1 - B + B * lengths / self._average)
            scores[positions] += idf * counts * (K1 + 1) / norm
        return [hit for hit in _top(scores, k) if hit.score > 0]

    def hybrid(self, vector: np.ndarray | None, query: str, k: int) -> list[Hit]:
        """Reciprocal rank fusion of both rankings (lexical alone without a vector)."""
        depth = max(k, CANDIDATES)
        rankings = [self.lexical(query, depth)]
        if vector is not None and self.vectors is not None:
            rankings.append(self.semantic(vector, depth))
        fused: dict[int, float] = {}
        for ranking in rankings:
            for rank, hit in enumerate(ranking):
                fused[hit.position] = fused.get(hit.position, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(fused.items(), key=lambda pair: -pair[1])[:k]
        return [Hit(position, score) for position, score in best]


def _matrix(chunks: list[KnowledgeChunk]) -> np.ndarray | None:
    """The vectors as rows, ``None`` unless every chunk has one of the same size."""
    if not chunks or any(not chunk.vector for chunk in chunks):
        return None
    size = len(chunks[0].vector)
    if any(len(chunk.vector) != size for chunk in chunks):
        return None
    joined = b"".join(chunk.vector for chunk in chunks)
    return np.frombuffer(joined, dtype="<f4").reshape(len(chunks), -1)


def _inverted(
    chunks: list[KnowledgeChunk],
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray]:
    building: dict[str, tuple[list[int], list[int]]] = {}
    lengths = np.zeros(len(chunks), dtype=np.float32)
    for position, chunk in enumerate(chunks):
        bag = Counter(terms(f"{chunk.heading}\n{chunk.text}"))
        lengths[position] = sum(bag.values())
        for term, count in bag.items():
            entry = building.setdefault(term, ([], []))
            entry[0].append(position)
            entry[1].append(count)
    postings = {
        term: (np.asarray(positions, dtype=np.int32), np.asarray(counts, dtype=np.float32))
        for term, (positions, counts) in building.items()
    }
    return postings, lengths


def _top(scores: np.ndarray, k: int) -> list[Hit]:
    k = min(k, len(scores))
    if k <= 0:
        return []
    best = np.argpartition(-scores, k - 1)[:k]
    ordered = best[np.argsort(-scores[best], kind="stable")]
    return [Hit(int(i), float(scores[i])) for i in ordered]


class Indexes:
    """Each base's index, built when its generation changed since, kept up to
    ``max_chunks`` chunks in all (the least recently searched bases go first)."""

    def __init__(self, max_chunks: int, partition_from: int = 0) -> None:
        self._max_chunks = max_chunks
        self._partition_from = partition_from
        self._built: OrderedDict[tuple[str, str], tuple[int, BaseIndex]] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[tuple[str, str], threading.Lock] = {}

    def get(
        self,
        org: str,
        base_id: str,
        generation: int,
        load: Callable[[], list[KnowledgeChunk]],
    ) -> BaseIndex:
        key = (org, base_id)
        with self._lock:
            found = self._fresh(key, generation)
            building = self._building.setdefault(key, threading.Lock())
        if found is not None:
            return found
        with building:  # one build per base at a time; the others wait for it
            with self._lock:
                found = self._fresh(key, generation)
            if found is not None:
                return found
            index = BaseIndex(load(), self._partition_from)
            with self._lock:
                self._built[key] = (generation, index)
                self._built.move_to_end(key)
                self._evict()
        return index

    def forget(self, org: str, base_id: str) -> None:
        with self._lock:
            self._built.pop((org, base_id), None)

    def _fresh(self, key: tuple[str, str], generation: int) -> BaseIndex | None:
        found = self._built.get(key)
        if found is None or found[0] != generation:
            return None
        self._built.move_to_end(key)
        return found[1]

    def _evict(self) -> None:
        total = sum(len(index.chunks) for _, index in self._built.values())
        while total > self._max_chunks and len(self._built) > 1:
            _, (_, index) = self._built.popitem(last=False)
            total -= len(index.chunks)
