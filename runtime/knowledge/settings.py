"""Settings of knowledge bases (``SIESTA_KNOWLEDGE__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class KnowledgeSettings(BaseModel):
    """Knowledge bases: what an org may keep, how documents are cut and indexed."""

    model_config = ConfigDict(extra="forbid")

    max_bases_per_org: int = Field(50, ge=0)
    """Knowledge bases an org may have; 0: none."""
    max_versions_per_base: int = Field(2_000, ge=1)
    """Content versions a base may hold (each document's versions count until removed)."""
    max_document_bytes: int = Field(20_000_000, ge=1)
    """Largest document added (its bytes as added, before text is extracted)."""
    max_text_chars: int = Field(5_000_000, ge=1)
    """Most text a document may yield; one with more fails to index, saying so."""
    max_chunks_per_base: int = Field(200_000, ge=1)
    """Passages a base may hold in all: each is a vector in memory when it is searched
    (about 1 KB: 200,000 take some 200 MB in each instance that searches the base)."""
    chunk_chars: int = Field(1_200, ge=200, le=20_000)
    """Longest passage (characters): the unit a search returns."""
    chunk_overlap_chars: int = Field(200, ge=0, le=5_000)
    """How much of a passage's end the next one of the same section repeats."""
    max_query_chars: int = Field(2_000, ge=1)
    """Longest search query (characters)."""
    max_cached_chunks: int = Field(1_000_000, ge=1)
    """Passages each instance keeps indexed in memory in all; the bases searched least
    recently are dropped past it (and read from the store again when searched)."""
    partition_from_chunks: int = Field(150_000, ge=0)
    """From how many passages a base's vectors are searched in partitions (the 32
    nearest of some √n clusters, about 10 % of the vectors) instead of all of them.
    Chosen by measurement (``bench/knowledge.py``, 100,000 passages): reading every
    vector takes 12 ms (p50), partitions 9 ms but miss 15 % of the exact 10 nearest;
    past 150,000 passages the full read nears the 30 ms a search may take. 0: never."""
    indexer_poll_seconds: float = Field(1.0, gt=0)
    """How often an idle indexer looks for documents to index."""
    claim_stale_seconds: float = Field(600.0, gt=0)
    """A document whose indexer has not finished in this long is indexed again (by any
    instance): an indexer that died loses no document."""
    direct_preload_chars: int = Field(18_000, ge=0)
    """An agent's files pre-loaded into context under the ``direct`` strategy (seed 003:
    "up to 18,000 characters (60% of the 30,000-character budget), smallest file
    first"); ``file_search`` is offered only for what overflows it."""
    fetch_timeout_seconds: float = Field(30.0, gt=0)
    """How long fetching a document's URL may take."""
