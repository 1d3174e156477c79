"""Knowledge bases over HTTP (``/v1/knowledge-bases``): operators make an org's bases
and add documents; agents search them through the ``knowledge_base`` System Tool
(``siesta_contract.functions.knowledge``) and read the documents with the content
tools."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

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


TextType = Literal["text/plain", "text/markdown", "text/html", "text/csv"]
DocumentType = Literal[
    "text/plain",
    "text/markdown",
    "text/html",
    "text/csv",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
]
"""The formats knowledge bases read (``runtime/knowledge/extract.py``)."""
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
DOCUMENT_NAME = Field(min_length=1, max_length=255, pattern=NON_BLANK_TEXT)


class TextDocument(BaseModel):
    """A document given as text; its name says how to read it (``.md``, ``.html``,
    ``.csv``, else plain text) unless ``contentType`` does."""

    model_config = ConfigDict(extra="forbid")

    name: str = DOCUMENT_NAME
    """The document's name in the base: adding the same name again makes a new version
    of that document when the content changed."""
    text: str
    contentType: TextType | None = None


class UploadDocument(BaseModel):
    """A document's bytes (PDF, DOCX, XLSX or any text), in base64."""

    model_config = ConfigDict(extra="forbid")

    name: str = DOCUMENT_NAME
    contentBase64: str = Field(pattern=BASE64)
    contentType: DocumentType


class FileDocument(BaseModel):
    """A conversation's file or artifact, read as it is now (a copy: the file may change
    or go afterwards). A format no reader knows fails to index, saying so."""

    model_config = ConfigDict(extra="forbid")

    conversationId: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)
    fileId: str = Field(min_length=1, max_length=255)
    name: str | None = Field(None, min_length=1, max_length=255, pattern=NON_BLANK_TEXT)
    """Default: the file's name."""


class UrlDocument(BaseModel):
    """A page or file fetched by the service, from a host on the deployment's egress
    allowlist (the one sandboxes reach). A format no reader knows fails to index."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://[^\s]+$")
    name: str | None = Field(None, min_length=1, max_length=255, pattern=NON_BLANK_TEXT)
    """Default: the URL it was fetched from (after redirects)."""


class DocumentAdd(RootModel[TextDocument | UploadDocument | FileDocument | UrlDocument]):
    """A document to add, from exactly one source (each form's fields are its own)."""


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
