"""Adapters of the ``memory_banks`` System Tool: the caller's org's banks
(``runtime/memory/banks.py``), arguments checked with the catalog's models."""

from __future__ import annotations

from typing import Any

from siesta_contract.functions.memory import (
    AddChatTurnArgs,
    AddMemoryArgs,
    ListMemoryBanksArgs,
    ListMemoryBanksResult,
    LoadChatHistoryArgs,
    LoadMemoryArgs,
    SearchMemoryArgs,
)

from runtime.functions.base import parse_arguments
from runtime.functions.memory import (
    ADD_CHAT_TURN,
    ADD_MEMORY,
    LIST_MEMORY_BANKS,
    LOAD_CHAT_HISTORY,
    LOAD_MEMORY,
    SEARCH_MEMORY,
)
from runtime.memory.banks import MemoryBanks, bank_info
from runtime.tools.call import Adapter, ToolCall


def memory_adapters(banks: MemoryBanks) -> dict[str, Adapter]:
    def list_banks(call: ToolCall, arguments: dict[str, Any]) -> Any:
        parse_arguments(ListMemoryBanksArgs, LIST_MEMORY_BANKS.name, arguments)
        found = [bank_info(bank) for bank in banks.list(call.ctx.org)]
        return ListMemoryBanksResult(memoryBanks=found).model_dump(mode="json")

    def add_chat_turn(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(AddChatTurnArgs, ADD_CHAT_TURN.name, arguments)
        added = banks.add(
            call.ctx.org, a.memory_bank_id, a.key, a.content, a.speaker, ADD_CHAT_TURN.name
        )
        return added.model_dump(mode="json")

    def add_memory(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(AddMemoryArgs, ADD_MEMORY.name, arguments)
        added = banks.add(call.ctx.org, a.memory_bank_id, a.key, a.content, None, ADD_MEMORY.name)
        return added.model_dump(mode="json")

    def search(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(SearchMemoryArgs, SEARCH_MEMORY.name, arguments)
        found = banks.search(call.ctx.org, a.memory_bank_id, a.key, a.query, a.top_n)
        return found.model_dump(mode="json")

    def load(function: str, model: type[LoadMemoryArgs | LoadChatHistoryArgs]) -> Adapter:
        def adapter(call: ToolCall, arguments: dict[str, Any]) -> Any:
            a = parse_arguments(model, function, arguments)
            loaded = banks.load(call.ctx.org, a.memory_bank_id, a.key, a.order, a.limit, function)
            return loaded.model_dump(mode="json")

        return adapter

    return {
        LIST_MEMORY_BANKS.name: list_banks,
        ADD_CHAT_TURN.name: add_chat_turn,
        ADD_MEMORY.name: add_memory,
        SEARCH_MEMORY.name: search,
        LOAD_CHAT_HISTORY.name: load(LOAD_CHAT_HISTORY.name, LoadChatHistoryArgs),
        LOAD_MEMORY.name: load(LOAD_MEMORY.name, LoadMemoryArgs),
    }
