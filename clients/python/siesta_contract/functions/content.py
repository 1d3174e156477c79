"""The ``content`` System Tool: conversation files and artifacts read in pieces.

Names follow the peer platform's content tools (seeds/004_*): ``list_content_sources``,
``load_content``, ``peek_content``, ``grep_content``, ``get_content_stats``. Caps are
settings (``SIESTA_FILES__CONTENT__*``); results say when they cut and where to go on.
``file`` may be left out when the agent's run names its content (``contentDefault``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from siesta_contract.base import Arguments, Result

FILE_FIELD = Field(
    None,
    min_length=1,
    description="A conversation file's id, or its name (the newest file of that name), "
    "or a knowledge base search result's source_connection_content_version_id; "
    "required unless the run names its content (then that is the default)",
)


class ListContentSourcesArgs(Arguments):
    limit: int = Field(20, ge=1, description="Most files to return (capped by the deployment)")
    offset: int = Field(0, ge=0, description="Files to skip (newest first), for the next page")


class LoadContentArgs(Arguments):
    file: str | None = FILE_FIELD
    offset: int = Field(0, ge=0, description="First character (0-based): a previous next")


class PeekContentArgs(Arguments):
    file: str | None = FILE_FIELD
    start: int | None = Field(None, ge=0, description="First character (0-based)")
    stop: int | None = Field(None, ge=0, description="End character (exclusive)")
    startLine: int | None = Field(
        None, ge=1, description="First line (1-based), instead of a character range"
    )
    endLine: int | None = Field(None, ge=1, description="Last line (inclusive)")

    @model_validator(mode="after")
    def _one_range(self) -> PeekContentArgs:
        chars = self.start is not None or self.stop is not None
        lines = self.startLine is not None or self.endLine is not None
        if chars and lines:
            msg = "give a character range (start, stop) or a line range (startLine, endLine)"
            raise ValueError(msg)
        if self.start is not None and self.stop is not None and self.stop < self.start:
            msg = "stop must not be before start"
            raise ValueError(msg)
        if self.startLine and self.endLine and self.endLine < self.startLine:
            msg = "endLine must not be before startLine"
            raise ValueError(msg)
        return self


class GrepContentArgs(Arguments):
    file: str | None = FILE_FIELD
    query: str = Field(min_length=1, description="Text to find (or a regular expression)")
    regex: bool = Field(False, description="Treat query as a Python regular expression")
    caseSensitive: bool = Field(False, description="Match case exactly (default: ignore case)")
    contextLines: int = Field(2, ge=0, description="Lines before and after each match (capped)")
    maxMatches: int | None = Field(None, ge=1, description="Most matches (capped)")
    startLine: int = Field(1, ge=1, description="Line to start searching at (a previous nextLine)")


class GetContentStatsArgs(Arguments):
    file: str | None = FILE_FIELD


class ContentSource(Result):
    fileId: str
    name: str
    kind: Literal["attachment", "artifact", "working", "knowledge"]
    contentType: str
    size: int
    createdAt: float


class ListContentSourcesResult(Result):
    sources: list[ContentSource]
    total: int
    offset: int
    nextOffset: int | None
    """Where the next page starts; ``None`` when this page reaches the last file."""
    limit: int


class FileRef(Result):
    fileId: str
    name: str


class PeekContentResult(Result):
    file: FileRef
    unit: Literal["chars", "lines"]
    content: str
    start: int
    """First character (``chars``) or line (``lines``) returned."""
    end: int
    """Character after the last one returned, or the last line returned (0: none)."""
    next: int | None
    """Where the following piece starts (character or line); ``None`` at the end."""
    truncated: bool
    """The range asked for was cut at a cap (``limit``): ``next`` goes on from there."""
    limit: int
    """The cap in force, in ``unit``."""


class GrepMatch(Result):
    line: int
    text: str
    before: list[str]
    after: list[str]
    cut: bool = False
    """A line here was longer than ``lineLimit`` characters and was cut."""


class GrepContentResult(Result):
    file: FileRef
    matches: list[GrepMatch]
    scannedLines: int
    nextLine: int | None
    """Where to search on (``startLine``) when the search stopped early; ``None``:
    searched to the end."""
    truncated: bool
    stoppedAt: Literal["maxMatches", "scanChars"] | None
    limitMatches: int
    limitScanChars: int
    lineLimit: int


class ContentStatsResult(Result):
    file: FileRef
    kind: Literal["attachment", "artifact", "working", "knowledge"]
    contentType: str
    size: int
    text: bool
    """UTF-8 text; the counts below are ``None`` for other files."""
    chars: int | None
    lines: int | None
    words: int | None
    complete: bool
    """False when the text is longer than ``limitScanChars``: counts cover that much."""
    limitScanChars: int
