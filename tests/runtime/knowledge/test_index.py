"""A base's index: BM25 over postings, vectors as one matrix, the two fused by rank;
built again only when the base's generation changes, within a memory bound."""

from __future__ import annotations

import numpy as np

from runtime.core.knowledge_records import KnowledgeChunk
from runtime.knowledge.index import BaseIndex, Indexes


def chunk(n: int, text: str, vector: list[float] | None = None) -> KnowledgeChunk:
    data = np.asarray(vector, dtype="<f4").tobytes() if vector else b""
    return KnowledgeChunk(f"cv{n}", 0, "", text, 0, data)


def test_lexical_ranks_by_rare_shared_words_and_skips_the_rest() -> None:
    index = BaseIndex(
        [
            chunk(0, "the cat sat on the mat"),
            chunk(1, "the zebra grazes"),
            chunk(2, "a zebra and a zebra foal"),
        ]
    )
    hits = index.lexical("zebra", 10)
    assert [h.position for h in hits] == [2, 1]  # more zebras first; the cat not at all
    assert index.lexical("unicorn", 10) == []
    assert not index.semantic_ready and index.semantic(np.ones(2, dtype="<f4"), 3) == []


def test_hybrid_fuses_both_rankings() -> None:
    index = BaseIndex(
        [
            chunk(0, "invoice payment terms", [1.0, 0.0]),
            chunk(1, "unrelated words entirely", [0.0, 1.0]),
            chunk(2, "payment schedule", [0.9, 0.1]),
        ]
    )
    query = np.asarray([1.0, 0.0], dtype="<f4")
    assert [h.position for h in index.semantic(query, 2)] == [0, 2]
    fused = index.hybrid(query, "payment", 3)
    assert [h.position for h in fused][:2] in ([0, 2], [2, 0])
    assert index.hybrid(None, "unrelated", 3)[0].position == 1  # no vector: words alone


def test_an_index_is_built_once_per_generation_within_the_bound() -> None:
    loads: list[str] = []

    def load(name: str, count: int) -> list[KnowledgeChunk]:
        loads.append(name)
        return [chunk(i, f"{name} text {i}") for i in range(count)]

    indexes = Indexes(max_chunks=10)
    first = indexes.get("o", "kb1", 1, lambda: load("kb1", 6))
    assert indexes.get("o", "kb1", 1, lambda: load("kb1", 6)) is first
    assert indexes.get("o", "kb1", 2, lambda: load("kb1", 6)) is not first  # changed
    indexes.get("o", "kb2", 1, lambda: load("kb2", 6))  # 12 > 10: kb1 goes
    indexes.get("o", "kb1", 2, lambda: load("kb1", 6))
    assert loads == ["kb1", "kb1", "kb2", "kb1"]
    indexes.get("other-org", "kb1", 2, lambda: load("x", 1))  # another org's, its own
    assert loads[-1] == "x"


def test_a_large_base_reads_only_the_partitions_nearest_to_the_query() -> None:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((20, 16)).astype("<f4")
    points = np.concatenate([c + 0.05 * rng.standard_normal((50, 16)) for c in centres])
    points = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype("<f4")
    chunks = [chunk(i, f"text {i}", list(map(float, p))) for i, p in enumerate(points)]
    index = BaseIndex(chunks, partition_from=500, probes=4)
    assert index.partitions is not None
    query = points[123]
    candidates = index.partitions.candidates(query)
    assert len(candidates) < len(points) / 2  # not every vector is read
    assert len(set(candidates.tolist())) == len(candidates)  # each vector in one partition
    exact = [h.position for h in index.semantic(query, 10, exact=True)]
    probed = [h.position for h in index.semantic(query, 10)]
    assert probed[0] == 123 and exact[0] == 123
    assert len(set(exact) & set(probed)) >= 9  # clustered data: next to nothing missed
    assert BaseIndex(chunks, partition_from=5000).partitions is None  # too few to partition
