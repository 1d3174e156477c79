"""Adapters of the ``content`` System Tool: conversation files read in pieces
(``runtime/files/content.py``), arguments checked with the catalog's models. A call
that names no file reads the run's own content item (the agent's ``contentDefault``)."""

from __future__ import annotations

from typing import Any

from siesta_contract.functions.content import (
    GetContentStatsArgs,
    GrepContentArgs,
    ListContentSourcesArgs,
    LoadContentArgs,
    PeekContentArgs,
)

from runtime.core.errors import InvalidArguments
from runtime.files.content import ContentReader
from runtime.functions.base import parse_arguments
from runtime.functions.content import (
    GET_CONTENT_STATS,
    GREP_CONTENT,
    LIST_CONTENT_SOURCES,
    LOAD_CONTENT,
    PEEK_CONTENT,
)
from runtime.tools.call import Adapter, ToolCall


def file_of(call: ToolCall, function: str, given: str | None) -> str:
    """The file a content call reads: the one it names, else the run's default."""
    chosen = given or call.agent.content_default
    if chosen is None:
        msg = f"{function}: give a file (this run names no content of its own: contentDefault)"
        raise InvalidArguments(msg)
    return chosen


def content_adapters(reader: ContentReader) -> dict[str, Adapter]:
    def list_sources(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(ListContentSourcesArgs, LIST_CONTENT_SOURCES.name, arguments)
        return reader.list_sources(call.ctx, a.limit, a.offset).model_dump(mode="json")

    def load(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(LoadContentArgs, LOAD_CONTENT.name, arguments)
        file = file_of(call, LOAD_CONTENT.name, a.file)
        return reader.load(call.ctx, file, a.offset).model_dump(mode="json")

    def peek(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(PeekContentArgs, PEEK_CONTENT.name, arguments)
        file = file_of(call, PEEK_CONTENT.name, a.file)
        return reader.peek(call.ctx, file, a).model_dump(mode="json")

    def grep(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(GrepContentArgs, GREP_CONTENT.name, arguments)
        file = file_of(call, GREP_CONTENT.name, a.file)
        return reader.grep(call.ctx, file, a).model_dump(mode="json")

    def stats(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(GetContentStatsArgs, GET_CONTENT_STATS.name, arguments)
        file = file_of(call, GET_CONTENT_STATS.name, a.file)
        return reader.stats(call.ctx, file).model_dump(mode="json")

    return {
        LIST_CONTENT_SOURCES.name: list_sources,
        LOAD_CONTENT.name: load,
        PEEK_CONTENT.name: peek,
        GREP_CONTENT.name: grep,
        GET_CONTENT_STATS.name: stats,
    }
