"""Documents into a knowledge base: where their bytes come from, and their indexing.

Adding a document stores its bytes (the blob store) and a ``queued`` content version;
it never waits for indexing. An indexer (``indexer.py``, in every instance) takes
queued versions one at a time from the store, extracts their text, cuts it into
passages, embeds them and stores the passages with the version, now ``ready``. A
version whose text cannot be read, or that would pass a limit, is ``failed`` with the
reason; nothing of it is searched.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from siesta_contract.knowledge import (
    DocumentAdd,
    FileDocument,
    TextDocument,
    UploadDocument,
)

from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.core.knowledge_records import ContentVersion, KnowledgeChunk
from runtime.files.conversation import BlobStore, ConversationFiles, content_type_for
from runtime.knowledge.chunking import embedding_text, passages
from runtime.knowledge.errors import DocumentTooLarge, KnowledgeLimitReached, UrlDocumentsOff
from runtime.knowledge.extract import extract
from runtime.knowledge.fetch import DocumentFetcher
from runtime.knowledge.settings import KnowledgeSettings
from runtime.memory.embedding import Embedder
from runtime.seams.stores import KnowledgeStore

SETTING = "SIESTA_KNOWLEDGE__"
EMBED_BATCH = 256


def source_blob(version_id: str) -> str:
    return f"kbsrc{version_id}"


def text_blob(version_id: str) -> str:
    return f"kbtxt{version_id}"


@dataclass(frozen=True)
class Source:
    name: str
    data: bytes
    content_type: str
    kind: str


class DocumentSources:
    """The bytes of a document to add, from wherever ``DocumentAdd`` names."""

    def __init__(
        self,
        files: ConversationFiles,
        fetcher: DocumentFetcher | None,
        settings: KnowledgeSettings,
    ) -> None:
        self._files = files
        self._fetcher = fetcher
        self._settings = settings

    def read(self, org: str, added: DocumentAdd) -> Source:
        limit = self._settings.max_document_bytes
        body = added.root
        if isinstance(body, TextDocument):
            data = body.text.encode()
            self._check_size(len(data))
            return Source(body.name, data, body.contentType or _text_type(body.name), "upload")
        if isinstance(body, UploadDocument):
            self._check_size(len(body.contentBase64) * 3 // 4 - 2)
            data = base64.b64decode(body.contentBase64)  # the schema's pattern: base64
            self._check_size(len(data))
            return Source(body.name, data, body.contentType, "upload")
        if isinstance(body, FileDocument):
            ctx = CallContext(org=org, user="knowledge-base", conversation=body.conversationId)
            record = self._files.get(ctx, body.fileId)
            self._check_size(record.size)
            data = self._files.read_bytes(record, limit)
            return Source(body.name or record.name, data, record.content_type, "file")
        if self._fetcher is None:
            msg = (
                "documents by URL need egress on: the service fetches only hosts the "
                "deployment's egress allowlist lists (SIESTA_EGRESS__ALLOW lists none)"
            )
            raise UrlDocumentsOff(msg)
        data, content_type, final = self._fetcher.fetch(body.url, limit)
        name = body.name or final
        return Source(name, data, content_type or content_type_for(name), "url")

    def _check_size(self, size: int) -> None:
        limit = self._settings.max_document_bytes
        if size > limit:
            msg = f"the document is {size} bytes, over {limit} ({SETTING}MAX_DOCUMENT_BYTES)"
            raise DocumentTooLarge(msg, limit=limit, unit="bytes")


def _text_type(name: str) -> str:
    """How a text document is read: by its name's extension, else as plain text."""
    guessed = content_type_for(name)
    return guessed if guessed in ("text/markdown", "text/html", "text/csv") else "text/plain"


def new_version(
    org: str, base_id: str, source: Source, now: float, latest: ContentVersion | None
) -> ContentVersion | None:
    """The version ``source`` makes, ``None`` when it is the document's latest again.
    A file or page of a format no reader knows is added and fails to index, saying so
    (uploads name their format in the request's schema)."""
    digest = hashlib.sha256(source.data).hexdigest()
    if latest is not None and latest.sha256 == digest and latest.status != "failed":
        return None
    return ContentVersion(
        org=org,
        base_id=base_id,
        version_id="cv" + secrets.token_hex(8),
        document_id=document_id(base_id, source.name),
        name=source.name,
        source=source.kind,
        content_type=source.content_type,
        size=len(source.data),
        sha256=digest,
        created_at=now,
    )


def document_id(base_id: str, name: str) -> str:
    return "doc" + hashlib.sha256(f"{base_id}\0{name}".encode()).hexdigest()[:16]


class Indexing:
    """One indexing step at a time: take a version, index it, store the outcome."""

    def __init__(
        self,
        store: KnowledgeStore,
        blobs: BlobStore,
        settings: KnowledgeSettings,
        embedder: Embedder | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._settings = settings
        self._embedder = embedder
        self._clock = clock

    def next(self) -> ContentVersion | None:
        """Index one waiting version (its outcome), ``None`` when none waits."""
        now = self._clock()
        version = self._store.claim_version(now, now - self._settings.claim_stale_seconds)
        if version is None:
            return None
        try:
            return self._index(version)
        except Exception as exc:  # any document's failure is its own, never the indexer's
            reason = str(exc) if isinstance(exc, SiestaError) else f"{type(exc).__name__}: {exc}"
            failed = version.but(status="failed", error=reason[:1000], indexed_at=self._clock())
            self._store.save_version(failed)
            return failed

    def _index(self, version: ContentVersion) -> ContentVersion:
        with self._blobs.open(source_blob(version.version_id)) as handle:
            data = handle.read()
        extracted = extract(data, version.name, version.content_type)
        limit = self._settings.max_text_chars
        if len(extracted.text) > limit:
            msg = (
                f"the document's text is {len(extracted.text)} characters, over {limit} "
                f"({SETTING}MAX_TEXT_CHARS)"
            )
            raise DocumentTooLarge(msg, limit=limit, unit="characters")
        text_bytes = extracted.text.encode()
        with self._blobs.writer(text_blob(version.version_id), None, _never) as writer:
            for start in range(0, len(text_bytes), 1 << 20):
                writer.write(text_bytes[start : start + (1 << 20)])
        found = passages(
            extracted.text, self._settings.chunk_chars, self._settings.chunk_overlap_chars
        )
        vectors = self._vectors([embedding_text(p) for p in found])
        chunks = [
            KnowledgeChunk(version.version_id, seq, p.heading, p.text, p.start, vector)
            for seq, (p, vector) in enumerate(zip(found, vectors, strict=True))
        ]
        ready = version.but(
            status="ready",
            title=extracted.title or version.name,
            chars=len(extracted.text),
            chunks=len(chunks),
            error="",
            indexed_at=self._clock(),
        )
        limit = self._settings.max_chunks_per_base
        stored = self._store.finish_version(ready, chunks, limit)
        if stored is False:
            msg = (
                f"its {len(chunks)} passages would take the knowledge base past {limit} "
                f"({SETTING}MAX_CHUNKS_PER_BASE)"
            )
            raise KnowledgeLimitReached(msg, limit=limit)
        if stored is None:  # removed while it was indexed
            self._blobs.delete(text_blob(version.version_id))
            self._blobs.delete(source_blob(version.version_id))
        return ready

    def _vectors(self, texts: list[str]) -> list[bytes]:
        model = self._embedder.model() if self._embedder is not None else None
        if model is None:
            return [b""] * len(texts)
        vectors: list[bytes] = []
        for start in range(0, len(texts), EMBED_BATCH):
            vectors.extend(model.embed(texts[start : start + EMBED_BATCH]))
        return vectors


def _never() -> Exception:  # the text blob has no limit of its own: the text was checked
    return DocumentTooLarge("unreachable")


def read_all(blobs: BlobStore, blob_id: str) -> str:
    with blobs.open(blob_id) as handle:
        return handle.read().decode("utf-8", errors="replace")
