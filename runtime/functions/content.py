"""The ``content`` System Tool's functions (models: ``siesta_contract.functions.content``)."""

from __future__ import annotations

from siesta_contract.functions.content import (
    ContentStatsResult,
    GetContentStatsArgs,
    GrepContentArgs,
    GrepContentResult,
    ListContentSourcesArgs,
    ListContentSourcesResult,
    LoadContentArgs,
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
LOAD_CONTENT = FunctionSpec(
    "load_content",
    "Load a conversation file's whole text (capped; a longer one goes on from `next`). "
    "For a part of a large file, peek_content or grep_content cost less.",
    LoadContentArgs,
    PeekContentResult,
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
CONTENT = [LIST_CONTENT_SOURCES, LOAD_CONTENT, PEEK_CONTENT, GREP_CONTENT, GET_CONTENT_STATS]
FILE_FUNCTIONS = frozenset(f.name for f in CONTENT if f is not LIST_CONTENT_SOURCES)
"""The content functions that read one file (``file``, or the run's default)."""
