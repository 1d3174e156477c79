"""What the stores keep of knowledge bases: a base, its documents' versions, their chunks.

A document is what a base holds under one name (``handbook.md``); each time it is
added with other content it gets a new **content version** (the reference's
``source_connection_content_version_id``), indexed on its own and searchable until
removed. The text a version was indexed from lives in the blob store
(``runtime/knowledge/texts.py``), the chunks and their vectors in the store.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Literal

VersionStatus = Literal["queued", "indexing", "ready", "failed"]


@dataclass(frozen=True)
class KnowledgeBase:
    org: str
    base_id: str
    name: str
    description: str
    created_at: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KnowledgeBase:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class ContentVersion:
    """One version of one document of a base, and how its indexing went."""

    org: str
    base_id: str
    version_id: str
    document_id: str
    """The same for every version of a document (a base's document of that name)."""
    name: str
    """Where it came from: the upload's or file's name, or the URL."""
    source: str
    """``upload``, ``file`` (a conversation's file or artifact) or ``url``."""
    content_type: str
    size: int
    """Bytes of what was added (before text was extracted)."""
    sha256: str
    created_at: float
    status: VersionStatus = "queued"
    title: str = ""
    """The document's own title (its first heading, an HTML title), else its name."""
    error: str = ""
    """Why indexing failed (``status`` ``failed``)."""
    chars: int = 0
    """Characters of the text extracted (what the content tools read)."""
    chunks: int = 0
    claimed_at: float = 0.0
    """When an indexer took it (``indexing``): one whose indexer died is taken again."""
    indexed_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ContentVersion:
        return cls(**json.loads(text))

    def but(self, **changes: object) -> ContentVersion:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class KnowledgeChunk:
    """A passage of a version, with the headings it sits under and its embedding."""

    version_id: str
    seq: int
    heading: str
    """The heading trail above it (``Install > Linux``), searched with the passage."""
    text: str
    start: int
    """Where the passage begins in the version's text (a character offset)."""
    vector: bytes = b""
    """Little-endian float32, unit length (``b""``: the model could not be loaded)."""
