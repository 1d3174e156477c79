"""Adapters of the ``content`` System Tool: conversation files read in pieces
(``runtime/files/content.py``), arguments checked with the catalog's models."""

from __future__ import annotations

from typing import Any

from siesta_contract.functions.content import (
    GetContentStatsArgs,
    GrepContentArgs,
    ListContentSourcesArgs,
    PeekContentArgs,
)

from runtime.files.content import ContentReader
from runtime.functions.base import parse_arguments
from runtime.functions.content import (
    GET_CONTENT_STATS,
    GREP_CONTENT,
    LIST_CONTENT_SOURCES,
    PEEK_CONTENT,
)
from runtime.tools.call import Adapter, ToolCall


def content_adapters(reader: ContentReader) -> dict[str, Adapter]:
    def list_sources(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(ListContentSourcesArgs, LIST_CONTENT_SOURCES.name, arguments)
        return reader.list_sources(call.ctx, a.limit, a.offset).model_dump(mode="json")

    def peek(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(PeekContentArgs, PEEK_CONTENT.name, arguments)
        return reader.peek(call.ctx, a).model_dump(mode="json")

    def grep(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(GrepContentArgs, GREP_CONTENT.name, arguments)
        return reader.grep(call.ctx, a).model_dump(mode="json")

    def stats(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(GetContentStatsArgs, GET_CONTENT_STATS.name, arguments)
        return reader.stats(call.ctx, a.file).model_dump(mode="json")

    return {
        LIST_CONTENT_SOURCES.name: list_sources,
        PEEK_CONTENT.name: peek,
        GREP_CONTENT.name: grep,
        GET_CONTENT_STATS.name: stats,
    }
