"""Refusals of knowledge base calls (each limit's refusal names the limit)."""

from __future__ import annotations

from runtime.core.errors import InvalidRequest, NotFound, SiestaError


class KnowledgeBaseNotFound(NotFound):
    """No such base in the caller's org (another org's bases are never found)."""

    code = "knowledge_base_not_found"


class ContentVersionNotFound(NotFound):
    """No such content version in the base (or the caller's org)."""

    code = "content_version_not_found"


class KnowledgeLimitReached(SiestaError):
    """The org has its most bases, a base its most versions or passages (``limit``)."""

    code = "knowledge_limit_reached"


class DocumentTooLarge(InvalidRequest):
    """A document's bytes, or its text, are over the setting ``limit`` names."""

    code = "document_too_large"


class UrlDocumentsOff(SiestaError):
    """A document by URL on a deployment without egress: the service fetches only what
    sandboxes may reach, and they may reach nothing."""

    code = "url_documents_off"
