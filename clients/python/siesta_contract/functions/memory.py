"""The ``memory_banks`` System Tool: memory that outlives a run, kept per org.

Names, parameters, ranges and defaults are the peer platform's (seeds/004_*, "Memory
Bank Tools"): "Memory bank tools let the model read and write persistent memory that
survives across agent runs." Two types of bank: **conversation** ("chat-style history
partitioned by key and speaker") and **general** ("flat factual entries partitioned by
key, with no speaker"). A bank's ``mode`` (not defined there; ours) says whether an
agent may write to it: ``read_write``, or ``read_only`` (written by operators only).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from siesta_contract.base import Arguments, Result
from siesta_contract.text import NON_BLANK_TEXT

BankType = Literal["conversation", "general"]
BankMode = Literal["read_write", "read_only"]
Speaker = Literal["user", "assistant"]
Order = Literal["newest_first", "oldest_first"]

BANK_ID = Field(min_length=1, description="The unique identifier of the memory bank")
KEY = Field(
    min_length=1,
    description="The partition key (e.g. user ID, topic, category; for a conversation "
    "bank typically the conversation/user ID)",
)
ORDER_TEXT = "Sort order — newest_first (default) or oldest_first"
LIMIT = Field(50, ge=1, le=200, description="Maximum number of entries to return (1-200)")


class ListMemoryBanksArgs(Arguments):
    """ "This tool takes no parameters.\""""


class AddChatTurnArgs(Arguments):
    memory_bank_id: str = BANK_ID
    key: str = KEY
    content: str = Field(pattern=NON_BLANK_TEXT, description="The turn's text content")
    speaker: Speaker = Field(description="The speaker — user or assistant")


class AddMemoryArgs(Arguments):
    memory_bank_id: str = BANK_ID
    key: str = KEY
    content: str = Field(pattern=NON_BLANK_TEXT, description="The text content to store")


class SearchMemoryArgs(Arguments):
    memory_bank_id: str = BANK_ID
    query: str = Field(pattern=NON_BLANK_TEXT, description="The search query")
    key: str = Field(min_length=1, description="The partition key to search within")
    top_n: int = Field(10, ge=1, le=50, description="Maximum number of results to return")


class LoadChatHistoryArgs(Arguments):
    memory_bank_id: str = BANK_ID
    key: str = KEY
    order: Order = Field("newest_first", description=ORDER_TEXT)
    limit: int = LIMIT


class LoadMemoryArgs(Arguments):
    memory_bank_id: str = BANK_ID
    key: str = Field(min_length=1, description="The partition key to load entries for")
    order: Order = Field("newest_first", description=ORDER_TEXT)
    limit: int = LIMIT


class MemoryBankInfo(Result):
    memoryBankId: str
    name: str
    description: str
    type: BankType
    mode: BankMode
    """``read_only``: add_memory and add_chat_turn are refused (operators fill it)."""


class ListMemoryBanksResult(Result):
    memoryBanks: list[MemoryBankInfo]
    """Oldest first."""


class MemoryEntry(Result):
    entryId: str
    key: str
    content: str
    speaker: Speaker | None
    """A conversation bank's turn: who said it; ``None`` in a general bank."""
    createdAt: float


class AddedEntry(Result):
    memoryBankId: str
    entry: MemoryEntry
    entries: int
    """How many entries the key holds now."""
    limitEntries: int
    """The most a key may hold (``SIESTA_MEMORY__MAX_ENTRIES_PER_KEY``)."""


class LoadedEntries(Result):
    memoryBankId: str
    key: str
    order: Order
    entries: list[MemoryEntry]
    total: int
    """How many entries the key holds (more than returned when ``limit`` cut)."""
    limit: int


class ScoredEntry(MemoryEntry):
    score: float
    """Higher is closer: cosine similarity (``semantic``) or BM25 (``lexical``)."""


class SearchResults(Result):
    memoryBankId: str
    key: str
    results: list[ScoredEntry]
    """Best first, at most ``top_n``."""
    method: Literal["semantic", "lexical"]
    """How they were ranked: ``lexical`` (shared words, BM25) when the deployment chose
    it or the embedding model could not be loaded (``note`` says so)."""
    searched: int
    """How many entries of the key were compared."""
    note: str | None = None
