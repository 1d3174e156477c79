"""Knowledge bases on both backends: bases per org under the org's limit, versions per
base under the base's, one indexer per version (and a dead indexer's version taken
again), chunks stored with their ``ready`` record under the chunk limit, and
everything of a base gone with it."""

from __future__ import annotations

from dataclasses import replace

from runtime.core.knowledge_records import ContentVersion, KnowledgeBase, KnowledgeChunk
from runtime.seams.stores import Stores

BASE = KnowledgeBase("org-a", "kb1", "Handbook", "how we work", 10.0)


def version(n: int, base: str = "kb1", org: str = "org-a") -> ContentVersion:
    return ContentVersion(
        org, base, f"cv{n}", "doc1", "handbook.md", "upload", "text/markdown", 10 * n,
        f"sha{n}", 100.0 + n,
    )  # fmt: skip


def chunks(v: ContentVersion, count: int) -> list[KnowledgeChunk]:
    return [
        KnowledgeChunk(v.version_id, i, "Intro", f"passage {i}", 50 * i, bytes([i]) * 8)
        for i in range(count)
    ]


def test_bases_are_kept_per_org_with_the_org_limit(store: Stores) -> None:
    second = replace(BASE, base_id="kb2", created_at=5.0)
    assert store.knowledge.add_base(BASE, limit=2)
    assert store.knowledge.add_base(second, limit=2)
    assert not store.knowledge.add_base(replace(BASE, base_id="kb3"), limit=2)
    assert store.knowledge.add_base(replace(BASE, org="org-b"), limit=1)
    assert store.knowledge.list_bases("org-a") == [second, BASE]  # oldest first
    assert store.knowledge.get_base("org-a", "kb1") == BASE
    assert store.knowledge.get_base("org-c", "kb1") is None
    assert not store.knowledge.delete_base("org-c", "kb1")


def test_versions_are_added_under_the_limit_and_found_by_id_in_their_org(store: Stores) -> None:
    assert store.knowledge.add_version(version(1), limit=2) is None  # no such base yet
    store.knowledge.add_base(BASE, limit=5)
    assert store.knowledge.add_version(version(1), limit=2) is True
    assert store.knowledge.add_version(version(2), limit=2) is True
    assert store.knowledge.add_version(version(3), limit=2) is False
    assert store.knowledge.get_version("org-a", "cv2") == version(2)
    assert store.knowledge.get_version("org-b", "cv2") is None  # another org's id
    assert store.knowledge.list_versions("org-a", "kb1") == [version(1), version(2)]
    failed = version(2).but(status="failed", error="not text")
    assert store.knowledge.save_version(failed)
    assert store.knowledge.get_version("org-a", "cv2") == failed


def test_an_indexer_takes_each_version_once_and_a_stale_one_again(store: Stores) -> None:
    store.knowledge.add_base(BASE, limit=5)
    store.knowledge.add_version(version(1), limit=5)
    store.knowledge.add_version(version(2), limit=5)
    first = store.knowledge.claim_version(now=1000.0, stale_before=940.0)
    second = store.knowledge.claim_version(now=1000.0, stale_before=940.0)
    assert first is not None and second is not None
    assert (first.version_id, first.status, first.claimed_at) == ("cv1", "indexing", 1000.0)
    assert second.version_id == "cv2"
    assert store.knowledge.claim_version(now=1001.0, stale_before=941.0) is None  # both taken
    ready = second.but(status="ready", chunks=2)
    assert store.knowledge.finish_version(ready, chunks(second, 2), limit=10)
    # cv1's indexer died: a minute later it is taken again, cv2 (done) never.
    again = store.knowledge.claim_version(now=1100.0, stale_before=1040.0)
    assert again is not None and again.version_id == "cv1" and again.claimed_at == 1100.0
    assert store.knowledge.claim_version(now=1300.0, stale_before=1240.0) is not None  # cv1
    failed = again.but(status="failed", error="boom")
    assert store.knowledge.save_version(failed)
    assert store.knowledge.claim_version(now=1500.0, stale_before=1440.0) is None


def test_chunks_are_searchable_once_ready_within_the_base_limit(store: Stores) -> None:
    store.knowledge.add_base(BASE, limit=5)
    one, two = version(1), version(2)
    store.knowledge.add_version(one, limit=5)
    store.knowledge.add_version(two, limit=5)
    assert store.knowledge.chunks("org-a", "kb1") == []
    before = store.knowledge.generation("org-a", "kb1")
    assert store.knowledge.finish_version(one.but(status="ready"), chunks(one, 3), limit=5)
    assert store.knowledge.generation("org-a", "kb1") == before + 1
    assert store.knowledge.finish_version(two.but(status="ready"), chunks(two, 3), limit=5) is False
    assert store.knowledge.chunk_count("org-a", "kb1") == 3
    assert store.knowledge.chunks("org-a", "kb1") == chunks(one, 3)  # text and vector, as written
    assert store.knowledge.finish_version(two.but(status="ready"), chunks(two, 2), limit=5)
    assert len(store.knowledge.chunks("org-a", "kb1")) == 5
    assert store.knowledge.chunks("org-b", "kb1") == []

    assert store.knowledge.delete_version("org-a", "kb1", "cv1")
    assert not store.knowledge.delete_version("org-a", "kb1", "cv1")
    assert store.knowledge.chunks("org-a", "kb1") == chunks(two, 2)
    assert store.knowledge.chunk_count("org-a", "kb1") == 2
    assert store.knowledge.generation("org-a", "kb1") == before + 3
    gone = version(1).but(status="ready")
    assert store.knowledge.finish_version(gone, chunks(gone, 1), limit=5) is None  # removed


def test_a_base_goes_with_its_versions_and_chunks(store: Stores) -> None:
    store.knowledge.add_base(BASE, limit=5)
    store.knowledge.add_version(version(1), limit=5)
    store.knowledge.finish_version(version(1).but(status="ready"), chunks(version(1), 2), 10)
    store.knowledge.add_version(version(2), limit=5)  # still queued
    assert store.knowledge.delete_base("org-a", "kb1")
    assert store.knowledge.get_version("org-a", "cv1") is None
    assert store.knowledge.chunks("org-a", "kb1") == []
    assert store.knowledge.chunk_count("org-a", "kb1") == 0
    assert store.knowledge.claim_version(now=1e9, stale_before=0.0) is None  # nothing left
    assert store.knowledge.add_version(version(3), limit=5) is None
