"""writeFile, readFile (paged, text kept whole across pages) and listFiles."""

from __future__ import annotations

import base64
import codecs

from siesta_contract.functions.sandbox import (
    DirEntryPublic,
    ListFilesResult,
    ReadFileResult,
    WriteFileResult,
)

from runtime.core.context import CallContext
from runtime.core.errors import InvalidArguments, InvalidRequest, OffsetPastEnd, TransferTooLarge
from runtime.sandbox.parts import SandboxParts, session_fields
from runtime.sandbox.paths import absolute_path, workspace_path


class FileFunctions(SandboxParts):
    def write_file(self, ctx: CallContext, path: str, content: str) -> WriteFileResult:
        """Write UTF-8 text to a workspace file, creating parent folders."""
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes)
        data = content.encode("utf-8", errors="strict")
        limit = self._limits.max_write_bytes
        if len(data) > limit:
            msg = (
                f"content is {len(data)} bytes, over the writeFile limit of {limit} bytes; "
                "create large content with a command instead (runCommand)"
            )
            raise TransferTooLarge(msg, limit=limit, unit="bytes", size=len(data))
        with self._sessions.operation(ctx) as session:
            size = self._provider.inside.write_file(
                session.record.sandbox_id, relative, [data], limit
            )
        return WriteFileResult(path=absolute_path(relative), size=size, **session_fields(session))

    def read_file(
        self, ctx: CallContext, path: str, max_bytes: int | None = None, offset: int = 0
    ) -> ReadFileResult:
        """Up to ``max_bytes`` from byte ``offset``: text as text, anything not UTF-8 as
        base64. ``nextOffset`` says where the next page starts (``None``: the end).

        A text page never starts or ends inside a character: an ``offset`` that falls
        inside one moves forward to the next character (the result's ``offset`` says
        where it starts), and a cut character is left to the next page. An offset past
        the end of the file is ``invalid_arguments`` naming the size; the size itself
        is an empty last page.
        """
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes)
        if max_bytes is not None and max_bytes < 1:
            msg = "maxBytes must be at least 1"
            raise InvalidRequest(msg)
        if offset < 0:
            msg = "offset must be at least 0"
            raise InvalidArguments(msg, offset=offset)
        limit = min(max_bytes or self._limits.max_read_bytes, self._limits.max_read_bytes)
        window = _Window(offset)
        slack = _MAX_CONTINUATION if offset else 0  # room to move past a split character
        with self._sessions.operation(ctx) as session:
            # siesta-fs reads from the start: the bytes before the offset are dropped
            # as they stream by, never kept.
            size = self._provider.inside.read_file(
                session.record.sandbox_id, relative, offset + limit + slack, window.write
            )
        if offset > size:
            msg = f"offset {offset} is past the end of {path!r}, which is {size} bytes"
            raise OffsetPastEnd(msg, offset=offset, size=size, path=absolute_path(relative))
        content, encoding, skipped, returned = _page(bytes(window.data), offset, limit, size)
        start = offset + skipped
        end = start + returned
        return ReadFileResult(
            path=absolute_path(relative),
            content=content,
            encoding=encoding,
            size=size,
            offset=start,
            returnedBytes=returned,
            nextOffset=end if end < size else None,
            truncated=end < size,
            limitBytes=limit,
            **session_fields(session),
        )

    def list_files(self, ctx: CallContext, path: str = ".") -> ListFilesResult:
        """One folder, not recursive: name, size and whether each entry is a folder."""
        relative = workspace_path(path, max_bytes=self._limits.max_path_bytes, allow_root=True)
        limit = self._limits.max_list_entries
        with self._sessions.operation(ctx) as session:
            listing = self._provider.inside.list_dir(session.record.sandbox_id, relative, limit)
        return ListFilesResult(
            path=absolute_path(relative),
            entries=[
                DirEntryPublic(
                    name=e.name, size=e.size, isDirectory=e.kind == "directory", type=e.kind
                )
                for e in listing.entries
            ],
            total=listing.total,
            truncated=listing.total > len(listing.entries),
            limitEntries=limit,
            **session_fields(session),
        )


class _Window:
    """A byte sink that drops everything before ``offset`` and keeps the rest."""

    def __init__(self, offset: int) -> None:
        self._skip = offset
        self.data = bytearray()

    def write(self, chunk: bytes) -> None:
        if self._skip >= len(chunk):
            self._skip -= len(chunk)
            return
        self.data += chunk[self._skip :]
        self._skip = 0


_MAX_CONTINUATION = 3
"""Bytes of one UTF-8 character after its first."""


def _page(data: bytes, offset: int, limit: int, size: int) -> tuple[str, str, int, int]:
    """(content, encoding, bytes skipped at the start, bytes returned) of the page of
    at most ``limit`` bytes in ``data``, which starts at ``offset`` of a file of ``size``.

    A page at an offset may start in the middle of a character: up to three
    continuation bytes there are skipped when what follows is text."""
    lead = 0
    if offset:
        while lead < min(_MAX_CONTINUATION, len(data)) and 0x80 <= data[lead] <= 0xBF:
            lead += 1
    for skip in dict.fromkeys((lead, 0)):
        chunk = data[skip : skip + limit]
        text = _utf8(chunk, cut=offset + skip + len(chunk) < size)
        if text is not None and (skip + text[1] > 0 or not chunk):
            return text[0], "utf-8", skip, text[1]
    # Not text, or one character longer than the page: raw bytes, so a reader
    # that follows nextOffset always moves on.
    chunk = data[:limit]
    return base64.b64encode(chunk).decode("ascii"), "base64", 0, len(chunk)


def _utf8(data: bytes, *, cut: bool) -> tuple[str, int] | None:
    """(text, bytes used), or ``None`` when ``data`` is not UTF-8. A cut may split the
    last character: those few bytes are left out rather than turning a text file into
    base64."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        text = decoder.decode(data, final=not cut)
    except UnicodeDecodeError:
        return None
    pending, _ = decoder.getstate()
    return text, len(data) - len(pending)
