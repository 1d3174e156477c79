"""Vectors in partitions (an inverted file, IVF): a query reads the partitions nearest
to it, not every vector.

The vectors are clustered once, when a base's index is built (k-means, ``√n``
centroids, a few rounds, seeded: the same vectors give the same partitions). A query
compares itself with the centroids, then scores only the vectors of the ``probes``
nearest partitions: at 100,000 passages, some 5 % of them. The price is recall: a
nearest vector in a partition not probed is missed; ``bench/knowledge.py`` measures
how many of the exact top 10 a search still finds, beside the time it saves.
"""

from __future__ import annotations

import math

import numpy as np

ROUNDS = 6
SEED = 7


class Partitions:
    def __init__(self, vectors: np.ndarray, probes: int) -> None:
        count = max(1, int(math.sqrt(len(vectors))))
        rng = np.random.default_rng(SEED)
        centroids = vectors[rng.choice(len(vectors), size=count, replace=False)].copy()
        for _ in range(ROUNDS):
            order, bounds = _grouped(np.argmax(vectors @ centroids.T, axis=1), count)
            sums = np.add.reduceat(vectors[order], np.minimum(bounds[:-1], len(order) - 1))
            for partition in np.flatnonzero(np.diff(bounds)):  # an empty one keeps its centroid
                mean = sums[partition]
                centroids[partition] = mean / (np.linalg.norm(mean) or 1.0)
        order, bounds = _grouped(np.argmax(vectors @ centroids.T, axis=1), count)
        self._centroids = centroids
        self._members = [order[bounds[i] : bounds[i + 1]] for i in range(count)]
        self._vectors = vectors
        self.probes = min(probes, count)

    def candidates(self, query: np.ndarray) -> np.ndarray:
        """The positions of the vectors in the partitions nearest to ``query``."""
        near = np.argpartition(-(self._centroids @ query), self.probes - 1)[: self.probes]
        return np.concatenate([self._members[i] for i in near])

    def scores(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions, cosine similarities) of the candidates."""
        positions = self.candidates(query)
        return positions, self._vectors[positions] @ query


def _grouped(nearest: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions ordered by partition, and where each partition's run begins (its
    end: the next one's beginning)."""
    order = np.argsort(nearest, kind="stable")
    return order, np.searchsorted(nearest[order], np.arange(count + 1))
