"""Settings of conversation files, staging and the content tools."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ContentSettings(BaseModel):
    """Caps of the ``content`` tools (conversation files read in pieces)."""

    model_config = ConfigDict(extra="forbid")

    max_peek_chars: int = Field(20_000, ge=1)
    """Most characters one ``peek_content`` returns (a larger range is cut)."""
    max_load_chars: int = Field(200_000, ge=1)
    """Most characters one ``load_content`` returns; a longer text is paged (``next``)."""
    max_peek_lines: int = Field(500, ge=1)
    """Most lines one ``peek_content`` in lines returns."""
    max_line_chars: int = Field(2_000, ge=16)
    """Longest line ``grep_content`` returns whole; longer lines are cut."""
    max_grep_matches: int = Field(100, ge=1)
    """Most matches one ``grep_content`` returns (a caller's ``maxMatches`` is capped)."""
    max_context_lines: int = Field(10, ge=0)
    """Most context lines before and after each match."""
    max_pattern_chars: int = Field(500, ge=1)
    """Longest ``grep_content`` query."""
    max_scan_chars: int = Field(100_000_000, ge=1)
    """Most characters one ``grep_content`` searches (from its ``startLine``) and
    ``get_content_stats`` counts; past it the result says where to go on."""
    max_list_sources: int = Field(200, ge=1)
    """Most files ``list_content_sources`` returns."""


class FileSettings(BaseModel):
    """Limits of the file functions, uploads and staging."""

    model_config = ConfigDict(extra="forbid")

    max_upload_bytes: int = Field(100 * 1024 * 1024, ge=1)
    """Largest attachment the backend may upload."""
    max_write_bytes: int = Field(1024 * 1024, ge=1)
    """Largest ``writeFile`` content (UTF-8 bytes); larger content is made by a command."""
    max_read_bytes: int = Field(1024 * 1024, ge=1)
    """Most bytes ``readFile`` returns (a caller's ``maxBytes`` is capped by it)."""
    max_list_entries: int = Field(1000, ge=1)
    """Most entries ``listFiles`` returns."""
    max_listing_bytes: int = Field(8 * 1024 * 1024, ge=64 * 1024)
    """Most bytes a file system listing (``.../fs/list``, E2B's ``ListDir``) may take from
    the sandbox (about 100 per entry plus its path and metadata); past it the call is refused
    (``transfer_too_large`` with ``limit``): list a folder further down, or less deep."""
    max_listing_entries: int = Field(20_000, ge=1)
    """Most entries such a listing may have; past it the call is refused the same way."""
    max_metadata_keys: int = Field(100, ge=1, le=10_000)
    """Most metadata keys one file may be given (E2B's ``files.write(metadata=...)``,
    ``.../fs/metadata``); more is refused (``metadata_too_large`` with ``limit``).
    Reading shows at most this many keys of a file (those set by a command in the
    sandbox past it are left out)."""
    max_metadata_bytes: int = Field(4096, ge=64, le=65_536)
    """Most bytes of one file's metadata: each key with its ``user.e2b.`` prefix plus
    its value (envd's count and its 4096 default: ext4 keeps a file's xattrs in one
    block); more is refused the same way, and reading shows no more."""
    max_publish_bytes: int = Field(100 * 1024 * 1024, ge=1)
    """Largest file ``publishFiles`` turns into an artifact."""
    max_publish_paths: int = Field(50, ge=1)
    """Most paths in one ``publishFiles`` call."""
    max_stage_file_bytes: int = Field(100 * 1024 * 1024, ge=1)
    """Largest single file ``runCommand(files=...)`` stages."""
    max_stage_total_bytes: int = Field(250 * 1024 * 1024, ge=1)
    """Most bytes one ``runCommand`` call stages into its conversation's sandbox."""
    max_stage_files: int = Field(50, ge=1)
    """Most files one ``runCommand`` call stages."""
    max_path_bytes: int = Field(1024, ge=16)
    """Longest workspace path accepted."""
    max_staged_bytes_per_conversation: int = Field(1024 * 1024 * 1024, ge=1)
    """Most bytes staged into one conversation's sandbox over all its calls (counted in
    the store, so across instances). A file staged again unchanged counts once; the
    count starts again when the sandbox is replaced or the conversation deleted."""
    content: ContentSettings = Field(default_factory=lambda: ContentSettings())
    """Caps of the ``content`` System Tool (``SIESTA_FILES__CONTENT__*``)."""
