"""Knowledge bases over HTTP (``/v1/knowledge-bases``): operators make an org's bases
and add documents; agents search them through the ``knowledge_base`` System Tool
(``siesta_contract.functions.knowledge``) and read the documents with the content
tools."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from siesta_contract.text import ID_MAX_CHARS, ID_PATTERN, NON_BLANK_TEXT

VersionStatus = Literal["queued", "indexing", "ready", "failed"]


class KnowledgeBaseCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, pattern=NON_BLANK_TEXT)
    """What agents see in list_knowledge_bases (not unique)."""
    description: str = Field("", max_length=2000)
    """What it holds and when to search it: agents read it to choose a base."""


class KnowledgeBasePublic(BaseModel):
    knowledgeBaseId: str
    name: str
    description: str
    createdAt: float
    documents: int
    """Content versions it holds (every status)."""
    chunks: int
    """Passages of its ready versions."""


class KnowledgeBasesPublic(BaseModel):
    knowledgeBases: list[KnowledgeBasePublic]
    """Oldest first."""


class DocumentAdd(BaseModel):
    """A document to add, from exactly one source: ``text`` or ``contentBase64`` (an
    upload, with its ``name``), a conversation's file or artifact (``conversationId``
    and ``fileId``), or a ``url`` fetched through the deployment's egress allowlist."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=255, pattern=NON_BLANK_TEXT)
    """The document's name in the base: adding the same name again makes a new
    version of that document when the content changed. Default: the file's name, or
    the URL."""
    text: str | None = None
    contentBase64: str | None = None
    contentType: str | None = Field(None, max_length=255)
    """How to read the upload (default: by its name's extension)."""
    conversationId: str | None = Field(
        None, min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN
    )
    fileId: str | None = Field(None, min_length=1, max_length=255)
    url: str | None = Field(None, min_length=1, max_length=2048, pattern=r"^https?://")

    @model_validator(mode="after")
    def _one_source(self) -> DocumentAdd:
        sources = [
            self.text is not None,
            self.contentBase64 is not None,
            self.fileId is not None,
            self.url is not None,
        ]
        if sum(sources) != 1:
            msg = "give exactly one of text, contentBase64, fileId (with conversationId), url"
            raise ValueError(msg)
        if (self.fileId is None) != (self.conversationId is None):
            msg = "fileId and conversationId go together"
            raise ValueError(msg)
        if (self.text is not None or self.contentBase64 is not None) and self.name is None:
            msg = "an upload (text or contentBase64) needs a name"
            raise ValueError(msg)
        return self


class ContentVersionPublic(BaseModel):
    contentVersionId: str
    """The reference's ``source_connection_content_version_id``: what search results
    carry and the content tools read (their ``file``)."""
    documentId: str
    """The same for every version of a document (its name in the base)."""
    knowledgeBaseId: str
    name: str
    source: Literal["upload", "file", "url"]
    contentType: str
    size: int
    sha256: str
    status: VersionStatus
    """``queued`` and ``indexing``: not searched yet; ``ready``: searched; ``failed``:
    never searched (``error`` says why)."""
    title: str
    error: str
    chars: int
    chunks: int
    createdAt: float
    indexedAt: float | None


class ContentVersionsPublic(BaseModel):
    versions: list[ContentVersionPublic]
    """Oldest first."""


class KnowledgeSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(pattern=NON_BLANK_TEXT)
    topN: int = Field(10, ge=1, le=200)
