"""Settings of memory banks (``SIESTA_MEMORY__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class MemorySettings(BaseModel):
    """Memory banks: how search ranks and the limits of what an org keeps."""

    model_config = ConfigDict(extra="forbid")

    embedding: Literal["wordllama", "lexical"] = "wordllama"
    """How ``search_memory`` ranks: ``wordllama``, cosine similarity of the embeddings
    of the model the ``wordllama`` package ships (loaded on first use, offline), or
    ``lexical``, BM25 over shared words (also used when the model cannot be loaded)."""
    max_banks_per_org: int = Field(100, ge=0)
    """Banks an org may have; 0: none."""
    max_entries_per_key: int = Field(2_000, ge=1)
    """Entries one key of a bank may hold. A search reads and compares them all, so this
    bounds its cost: reading the rows dominates, about 40 ms per 1,000 entries on SQLite
    (``bench/memory_recall.py``)."""
    max_content_chars: int = Field(8_000, ge=1)
    """Longest entry (characters)."""
    max_key_chars: int = Field(256, ge=1)
    """Longest partition key (characters)."""
    max_query_chars: int = Field(2_000, ge=1)
    """Longest ``search_memory`` query (characters)."""
