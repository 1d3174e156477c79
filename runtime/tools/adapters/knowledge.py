"""Adapters of the ``knowledge_base`` System Tool: the caller's org's knowledge bases
(``runtime/knowledge/bases.py``), arguments checked with the catalog's models. A
search that names no base uses the run's (``knowledgeBaseDefault``, the reference's
scenario 2a)."""

from __future__ import annotations

from typing import Any

from siesta_contract.functions.knowledge import (
    FileSearchArgs,
    FileSearchResult,
    ListKnowledgeBasesArgs,
    ListKnowledgeBasesResult,
    SearchKnowledgeBaseArgs,
)

from runtime.core.errors import InvalidArguments
from runtime.functions.base import parse_arguments
from runtime.functions.knowledge import FILE_SEARCH, LIST_KNOWLEDGE_BASES, SEARCH_KNOWLEDGE_BASE
from runtime.knowledge.bases import KnowledgeBases, base_info
from runtime.tools.call import Adapter, ToolCall


def knowledge_adapters(bases: KnowledgeBases) -> dict[str, Adapter]:
    def list_bases(call: ToolCall, arguments: dict[str, Any]) -> Any:
        parse_arguments(ListKnowledgeBasesArgs, LIST_KNOWLEDGE_BASES.name, arguments)
        found = [base_info(base) for base in bases.list(call.ctx.org)]
        return ListKnowledgeBasesResult(knowledge_bases=found).model_dump(mode="json")

    def search(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(SearchKnowledgeBaseArgs, SEARCH_KNOWLEDGE_BASE.name, arguments)
        chosen = a.knowledge_base_id or call.agent.knowledge_base_default
        if chosen is None:
            msg = (
                "search_knowledge_base: give a knowledge_base_id (list_knowledge_bases "
                "names them; this run names none: knowledgeBaseDefault)"
            )
            raise InvalidArguments(msg, field="knowledge_base_id")
        found = bases.search(call.ctx.org, chosen, a.query, a.top_n)
        return found.model_dump(mode="json")

    def file_search(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(FileSearchArgs, FILE_SEARCH.name, arguments)
        files = call.agent.files
        if files is None:
            msg = "file_search: this agent has no files (its configuration's files)"
            raise InvalidArguments(msg)
        found = bases.search(call.ctx.org, files.knowledge_base_id, a.query, a.limit)
        return FileSearchResult(
            results=found.results, method=found.method, searched=found.searched
        ).model_dump(mode="json")

    return {
        LIST_KNOWLEDGE_BASES.name: list_bases,
        SEARCH_KNOWLEDGE_BASE.name: search,
        FILE_SEARCH.name: file_search,
    }
