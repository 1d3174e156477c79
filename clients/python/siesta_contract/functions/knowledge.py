"""The ``knowledge_base`` System Tool: search an org's knowledge bases by meaning.

Names, parameters, ranges and defaults are the peer platform's (seeds/004_*,
"Knowledge Base Tools"): ``list_knowledge_bases`` ("This tool takes no parameters")
and ``search_knowledge_base(knowledge_base_id, query, top_n 1 to 200, default 10)``.
"Each result includes the ``source_connection_content_version_id``, source name,
content title, matched text, and similarity score, allowing the model to follow up
with content tools for deeper inspection": the id is what ``load_content`` and the
other content tools take as ``file``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from siesta_contract.base import Arguments, Result
from siesta_contract.text import NON_BLANK_TEXT


class ListKnowledgeBasesArgs(Arguments):
    """ "This tool takes no parameters.\""""


class SearchKnowledgeBaseArgs(Arguments):
    knowledge_base_id: str | None = Field(
        None,
        min_length=1,
        description="The unique identifier of the knowledge base to search",
    )
    query: str = Field(pattern=NON_BLANK_TEXT, description="The search query string")
    top_n: int = Field(10, ge=1, le=200, description="Maximum number of results to return")


class KnowledgeBaseInfo(Result):
    knowledge_base_id: str
    name: str
    description: str


class ListKnowledgeBasesResult(Result):
    knowledge_bases: list[KnowledgeBaseInfo]
    """Oldest first."""


class KnowledgeHit(Result):
    source_connection_content_version_id: str
    """The document version the passage is from: ``file`` of the content tools."""
    source_name: str
    """The document's name (the upload's or file's name, or its URL)."""
    content_title: str
    heading: str
    """The headings the passage sits under (``Install > Linux``)."""
    text: str
    """The matched passage."""
    start: int
    """Where the passage begins in the document's text (``peek_content``'s ``start``)."""
    score: float
    """Higher is closer; comparable within one search only (see ``method``)."""


class SearchKnowledgeBaseResult(Result):
    knowledge_base_id: str
    results: list[KnowledgeHit]
    """Best first, at most ``top_n``."""
    method: Literal["hybrid", "lexical"]
    """``hybrid``: the ranking by embedding similarity fused with the one by shared
    words (BM25), by reciprocal rank; ``lexical``: shared words alone, when the
    embedding model could not be loaded (``note`` says so)."""
    searched: int
    """How many passages of the base's ready documents were searched."""
    pending: int
    """Documents of the base still being indexed (not searched yet)."""
    note: str | None = None


class FileSearchArgs(Arguments):
    """Peer seed 003: "a file_search tool (query required, limit defaulting to 8) over
    the agent's uploaded files"."""

    query: str = Field(pattern=NON_BLANK_TEXT, description="What to look for in the files")
    limit: int = Field(8, ge=1, le=50, description="Most passages to return")


class FileSearchResult(Result):
    results: list[KnowledgeHit]
    """Best first, at most ``limit``, from the agent's files."""
    method: Literal["hybrid", "lexical"]
    searched: int


class PreloadedFile(Result):
    """One of the agent's files, pre-loaded into context (the ``direct`` strategy)."""

    source_connection_content_version_id: str
    name: str
    text: str
