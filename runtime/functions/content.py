"""The ``content`` System Tool's functions (models: ``siesta_contract.functions.content``)."""

from __future__ import annotations

from siesta_contract.functions.content import (
    ContentStatsResult,
    GetContentStatsArgs,
    GrepContentArgs,
    GrepContentResult,
    ListContentSourcesArgs,
    ListContentSourcesResult,
    PeekContentArgs,
    PeekContentResult,
)

from runtime.functions.base import FunctionSpec

LIST_CONTENT_SOURCES = FunctionSpec(
    "list_content_sources",
    "List this conversation's files (attachments and published artifacts), newest first, "
    "with the fileId the other content tools take.",
    ListContentSourcesArgs,
    ListContentSourcesResult,
)
PEEK_CONTENT = FunctionSpec(
    "peek_content",
    "Read a character range (start, stop) or line range (startLine, endLine) of a "
    "conversation file without loading it whole; follow `next` for the next piece.",
    PeekContentArgs,
    PeekContentResult,
)
GREP_CONTENT = FunctionSpec(
    "grep_content",
    "Find lines of a conversation file that contain a text (case-insensitive unless "
    "caseSensitive) or match a regular expression; returns line numbers with context.",
    GrepContentArgs,
    GrepContentResult,
)
GET_CONTENT_STATS = FunctionSpec(
    "get_content_stats",
    "Size, characters, lines, words and type of a conversation file.",
    GetContentStatsArgs,
    ContentStatsResult,
)
CONTENT = [LIST_CONTENT_SOURCES, PEEK_CONTENT, GREP_CONTENT, GET_CONTENT_STATS]
