"""Knowledge bases: operators make an org's bases and add documents; agents search them.

A base belongs to its org: another org's id is ``knowledge_base_not_found``, as an id
that never existed, and the same for content versions. Documents are indexed in the
background (``documents.py``); a search sees the versions that are ``ready`` and says
how many are still pending. Every limit is a setting (``SIESTA_KNOWLEDGE__*``) and a
refusal caused by one names it.
"""

from __future__ import annotations

import builtins
import secrets
import time
from collections.abc import Callable

import numpy as np

from siesta_contract.functions import knowledge as wire
from siesta_contract.knowledge import DocumentAdd, KnowledgeBaseCreate

from runtime.core.errors import InvalidArguments
from runtime.core.knowledge_records import ContentVersion, KnowledgeBase
from runtime.files.conversation import BlobStore, BlobWriter
from runtime.knowledge.documents import (
    SETTING,
    DocumentSources,
    document_id,
    new_version,
    read_all,
    source_blob,
    text_blob,
)
from runtime.knowledge.errors import (
    ContentVersionNotFound,
    KnowledgeBaseNotFound,
    KnowledgeLimitReached,
)
from runtime.knowledge.index import Indexes
from runtime.knowledge.settings import KnowledgeSettings
from runtime.memory.embedding import Embedder
from runtime.seams.stores import KnowledgeStore

PENDING = ("queued", "indexing")


class KnowledgeBases:
    def __init__(
        self,
        store: KnowledgeStore,
        blobs: BlobStore,
        sources: DocumentSources,
        settings: KnowledgeSettings,
        embedder: Embedder | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._sources = sources
        self._settings = settings
        self._embedder = embedder
        self._clock = clock
        self._indexes = Indexes(settings.max_cached_chunks, settings.partition_from_chunks)

    # The operators' side (HTTP).

    def create(self, org: str, body: KnowledgeBaseCreate) -> KnowledgeBase:
        base = KnowledgeBase(
            org=org,
            base_id="kb" + secrets.token_hex(8),
            name=body.name,
            description=body.description,
            created_at=self._clock(),
        )
        limit = self._settings.max_bases_per_org
        if not self._store.add_base(base, limit):
            msg = f"the org has {limit} knowledge bases, its most ({SETTING}MAX_BASES_PER_ORG)"
            raise KnowledgeLimitReached(msg, limit=limit, scope="org")
        return base

    def list(self, org: str) -> list[KnowledgeBase]:
        return self._store.list_bases(org)

    def get(self, org: str, base_id: str) -> KnowledgeBase:
        base = self._store.get_base(org, base_id)
        if base is None:
            msg = f"no knowledge base {base_id} in this org"
            raise KnowledgeBaseNotFound(msg, knowledgeBaseId=base_id)
        return base

    def counts(self, org: str, base_id: str) -> tuple[int, int]:
        """(versions, passages) the base holds."""
        versions = len(self._store.list_versions(org, base_id))
        return versions, self._store.chunk_count(org, base_id)

    def delete(self, org: str, base_id: str) -> None:
        versions = self._store.list_versions(org, base_id)
        if not self._store.delete_base(org, base_id):
            self.get(org, base_id)  # raises: there was none
        for version in versions:
            self._forget_blobs(version.version_id)
        self._indexes.forget(org, base_id)

    def add_document(
        self, org: str, base_id: str, body: DocumentAdd
    ) -> tuple[ContentVersion, bool]:
        """The version the document makes (``True``), or the document's latest when its
        content is the same (``False``: nothing is added or indexed again)."""
        self.get(org, base_id)
        source = self._sources.read(org, body)
        same_document = document_id(base_id, source.name)
        latest = next(
            (
                v
                for v in reversed(self._store.list_versions(org, base_id))
                if v.document_id == same_document
            ),
            None,
        )
        version = new_version(org, base_id, source, self._clock(), latest)
        if version is None:
            assert latest is not None
            return latest, False
        with self._blobs.writer(source_blob(version.version_id), None, _unlimited) as writer:
            _write(writer, source.data)
        added = self._store.add_version(version, self._settings.max_versions_per_base)
        if not added:
            self._blobs.delete(source_blob(version.version_id))
            if added is None:
                self.get(org, base_id)  # raises: deleted meanwhile
            limit = self._settings.max_versions_per_base
            msg = (
                f"knowledge base {base_id} holds {limit} content versions, its most "
                f"({SETTING}MAX_VERSIONS_PER_BASE): remove some first"
            )
            raise KnowledgeLimitReached(msg, limit=limit, scope="base")
        return version, True

    def versions(self, org: str, base_id: str) -> builtins.list[ContentVersion]:
        self.get(org, base_id)
        return self._store.list_versions(org, base_id)

    def version(self, org: str, base_id: str | None, version_id: str) -> ContentVersion:
        found = self._store.get_version(org, version_id)
        if found is None or (base_id is not None and found.base_id != base_id):
            msg = f"no content version {version_id} in this org"
            raise ContentVersionNotFound(msg, contentVersionId=version_id)
        return found

    def remove(self, org: str, base_id: str, version_id: str) -> None:
        self.version(org, base_id, version_id)
        if not self._store.delete_version(org, base_id, version_id):
            self.version(org, base_id, version_id)  # raises: removed meanwhile
        self._forget_blobs(version_id)

    def text(self, org: str, version_id: str) -> tuple[ContentVersion, str]:
        """A ready version and its text, for the content tools."""
        version = self.version(org, None, version_id)
        if version.status != "ready":
            msg = f"content version {version_id} is {version.status}, not ready to read"
            raise InvalidArguments(msg, contentVersionId=version_id, status=version.status)
        return version, read_all(self._blobs, text_blob(version_id))

    # An agent's files (seed 003): the latest ready version of each document of a base.

    def files(self, org: str, base_id: str) -> builtins.list[ContentVersion]:
        """The base's documents as an agent's files: each one's latest version, ready."""
        latest: dict[str, ContentVersion] = {}
        for version in self._store.list_versions(org, base_id):
            if version.status == "ready":
                latest[version.document_id] = version  # oldest first: the last one wins
        return builtins.list(latest.values())

    def preload_plan(self, org: str, base_id: str) -> tuple[builtins.list[ContentVersion], int]:
        """The ``direct`` strategy: the files that fit the budget, smallest first, and
        how many files the agent has (more than fit: some overflowed)."""
        files = sorted(self.files(org, base_id), key=lambda v: (v.chars, v.name))
        budget, used, fitting = self._settings.direct_preload_chars, 0, []
        for version in files:
            if used + version.chars > budget:
                break
            fitting.append(version)
            used += version.chars
        return fitting, len(files)

    # Both sides.

    def search(
        self, org: str, base_id: str, query: str, top_n: int
    ) -> wire.SearchKnowledgeBaseResult:
        self.get(org, base_id)
        if len(query) > self._settings.max_query_chars:
            limit = self._settings.max_query_chars
            msg = (
                f"query has {len(query)} characters; the most is {limit} ({SETTING}MAX_QUERY_CHARS)"
            )
            raise InvalidArguments(msg, limit=limit, unit="chars", field="query")
        generation = self._store.generation(org, base_id)
        index = self._indexes.get(
            org, base_id, generation, lambda: self._store.chunks(org, base_id)
        )
        model = self._embedder.model() if self._embedder is not None else None
        vector = None
        if model is not None and index.semantic_ready:
            vector = np.frombuffer(model.embed([query])[0], dtype="<f4")
        hits = index.hybrid(vector, query, top_n)
        versions = {v.version_id: v for v in self._store.list_versions(org, base_id)}
        results = []
        for hit in hits:
            chunk = index.chunks[hit.position]
            version = versions.get(chunk.version_id)
            if version is None:  # removed since the index was built
                continue
            results.append(
                wire.KnowledgeHit(
                    source_connection_content_version_id=version.version_id,
                    source_name=version.name,
                    content_title=version.title or version.name,
                    heading=chunk.heading,
                    text=chunk.text,
                    start=chunk.start,
                    score=round(hit.score, 6),
                )
            )
        failure = self._embedder.failure if self._embedder is not None else None
        return wire.SearchKnowledgeBaseResult(
            knowledge_base_id=base_id,
            results=results,
            method="hybrid" if vector is not None else "lexical",
            searched=len(index.chunks),
            pending=sum(1 for v in versions.values() if v.status in PENDING),
            note=f"ranked by shared words: {failure}" if failure else None,
        )

    def _forget_blobs(self, version_id: str) -> None:
        self._blobs.delete(source_blob(version_id))
        self._blobs.delete(text_blob(version_id))


def base_info(base: KnowledgeBase) -> wire.KnowledgeBaseInfo:
    return wire.KnowledgeBaseInfo(
        knowledge_base_id=base.base_id, name=base.name, description=base.description
    )


def _write(writer: BlobWriter, data: bytes) -> None:
    for start in range(0, len(data), 1 << 20):
        writer.write(data[start : start + (1 << 20)])


def _unlimited() -> Exception:  # the source was checked against its limit when read
    return KnowledgeLimitReached("unreachable")
