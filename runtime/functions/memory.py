"""The ``memory_banks`` System Tool's functions (models: ``siesta_contract.functions.memory``).

Descriptions quote the peer platform's reference (seeds/004_*, "Memory Bank Tools")."""

from __future__ import annotations

from siesta_contract.functions.memory import (
    AddChatTurnArgs,
    AddedEntry,
    AddMemoryArgs,
    ListMemoryBanksArgs,
    ListMemoryBanksResult,
    LoadChatHistoryArgs,
    LoadedEntries,
    LoadMemoryArgs,
    SearchMemoryArgs,
    SearchResults,
)

from runtime.functions.base import FunctionSpec

LIST_MEMORY_BANKS = FunctionSpec(
    "list_memory_banks",
    "List all memory banks available in the current account. Returns the ID, name, "
    "description, type (conversation or general), and mode (read_write or read_only) of "
    "each memory bank.",
    ListMemoryBanksArgs,
    ListMemoryBanksResult,
)
ADD_CHAT_TURN = FunctionSpec(
    "add_chat_turn",
    "Record a turn in a conversation memory bank. Use add_memory for general banks.",
    AddChatTurnArgs,
    AddedEntry,
)
ADD_MEMORY = FunctionSpec(
    "add_memory",
    "Write a fact to a general memory bank, partitioned by key. Use add_chat_turn for "
    "conversation banks.",
    AddMemoryArgs,
    AddedEntry,
)
SEARCH_MEMORY = FunctionSpec(
    "search_memory",
    "Search a memory bank using semantic similarity, scoped to a specific key. Works on "
    "both conversation and general banks.",
    SearchMemoryArgs,
    SearchResults,
)
LOAD_CHAT_HISTORY = FunctionSpec(
    "load_chat_history",
    "Load chat turns from a conversation memory bank in chronological order "
    "(newest_first by default). Use load_memory for general banks.",
    LoadChatHistoryArgs,
    LoadedEntries,
)
LOAD_MEMORY = FunctionSpec(
    "load_memory",
    "Load entries from a general memory bank in chronological order (newest_first by "
    "default). Use load_chat_history for conversation banks.",
    LoadMemoryArgs,
    LoadedEntries,
)
MEMORY = [
    LIST_MEMORY_BANKS,
    ADD_CHAT_TURN,
    ADD_MEMORY,
    SEARCH_MEMORY,
    LOAD_CHAT_HISTORY,
    LOAD_MEMORY,
]
"""In the reference's order."""
