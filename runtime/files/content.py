"""Conversation files read in pieces: the ``content`` System Tool.

Files are streamed from the blob store and decoded as they go, so a 100 MB
attachment is never held whole: a peek keeps only its range, a grep only its
matches and context, and a grep or stats call examines at most ``max_scan_chars``
and says where to go on. Only UTF-8 text is read (a file whose first bytes are not
text is refused with ``invalid_arguments``); characters are Unicode code points,
lines end at ``\\n`` (a ``\\r`` before it is dropped) and are numbered from 1.
"""

from __future__ import annotations

import codecs
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from siesta_contract.functions.content import (
    ContentSource,
    ContentStatsResult,
    FileRef,
    GrepContentArgs,
    GrepContentResult,
    GrepMatch,
    ListContentSourcesResult,
    PeekContentArgs,
    PeekContentResult,
)

from runtime.core.context import CallContext
from runtime.core.errors import InvalidArguments
from runtime.core.knowledge_records import ContentVersion
from runtime.core.records import FileKind, FileRecord
from runtime.files.conversation import ConversationFiles
from runtime.files.settings import ContentSettings

CHUNK_BYTES = 64 * 1024
SNIFF_BYTES = 8192
"""How much of a file decides whether it is text."""


class VersionTexts(Protocol):
    """Knowledge bases' content versions, by id in an org (``runtime/knowledge``)."""

    def text(self, org: str, version_id: str) -> tuple[ContentVersion, str]: ...


_VERSION_ID = re.compile(r"cv[0-9a-f]{16}")


@dataclass(frozen=True)
class _VersionRecord(FileRecord):
    """A content version, read as a file: its text is at hand, not in the blob store."""

    text: str = ""


class ContentReader:
    def __init__(
        self,
        files: ConversationFiles,
        settings: ContentSettings,
        versions: VersionTexts | None = None,
    ) -> None:
        self._files = files
        self._settings = settings
        self._versions = versions

    def list_sources(self, ctx: CallContext, limit: int, offset: int) -> ListContentSourcesResult:
        limit = min(limit, self._settings.max_list_sources)
        newest_first = self._files.list_files(ctx)[::-1]
        page = newest_first[offset : offset + limit]
        end = offset + len(page)
        return ListContentSourcesResult(
            sources=[_source(record) for record in page],
            total=len(newest_first),
            offset=offset,
            nextOffset=end if end < len(newest_first) else None,
            limit=limit,
        )

    def load(self, ctx: CallContext, file: str, offset: int) -> PeekContentResult:
        """The file's text from ``offset``, up to ``max_load_chars`` (then ``next``)."""
        record = self._text_file(ctx, file)
        return self._peek_chars(record, offset, None, self._settings.max_load_chars)

    def peek(self, ctx: CallContext, file: str, a: PeekContentArgs) -> PeekContentResult:
        record = self._text_file(ctx, file)
        if a.startLine is not None or a.endLine is not None:
            return self._peek_lines(record, a.startLine or 1, a.endLine)
        return self._peek_chars(record, a.start or 0, a.stop, self._settings.max_peek_chars)

    def _peek_chars(
        self, record: FileRecord, start: int, stop: int | None, limit: int
    ) -> PeekContentResult:
        until = start + limit if stop is None else min(stop, start + limit)
        position, parts, more = 0, [], False
        for chunk in self._text(record):
            if position + len(chunk) > start and position < until:
                parts.append(chunk[max(start - position, 0) : until - position])
            position += len(chunk)
            if position > until:
                more = True
                break
        if start > position:
            msg = f"start {start} is past the end of {record.name!r} ({position} characters)"
            raise InvalidArguments(msg, start=start, chars=position)
        content = "".join(parts)
        end = start + len(content)
        return PeekContentResult(
            file=_ref(record),
            unit="chars",
            content=content,
            start=start,
            end=end,
            next=end if more else None,
            truncated=more and (stop is None or stop > end),
            limit=limit,
        )

    def _peek_lines(self, record: FileRecord, first: int, last: int | None) -> PeekContentResult:
        max_lines, max_chars = self._settings.max_peek_lines, self._settings.max_peek_chars
        until = first + max_lines - 1 if last is None else min(last, first + max_lines - 1)
        taken: list[str] = []
        size, count, more = 0, 0, False
        for count, line in _lines(self._text(record)):
            if count < first:
                continue
            if count > until or (taken and size + len(line) > max_chars):
                more = True
                break
            taken.append(line[: max_chars - size])
            size += len(taken[-1]) + 1
            if len(line) > len(taken[-1]):  # one line longer than the cap: cut it
                more = True
                break
        else:
            if first > count + 1:
                msg = f"startLine {first} is past the end of {record.name!r} ({count} lines)"
                raise InvalidArguments(msg, startLine=first, lines=count)
        end = first + len(taken) - 1
        return PeekContentResult(
            file=_ref(record),
            unit="lines",
            content="\n".join(taken),
            start=first,
            end=end,
            next=end + 1 if more else None,
            truncated=more and (last is None or last > end),
            limit=max_lines,
        )

    def grep(self, ctx: CallContext, file: str, a: GrepContentArgs) -> GrepContentResult:
        settings = self._settings
        pattern = _pattern(a, settings.max_pattern_chars)
        record = self._text_file(ctx, file)
        cap = min(a.maxMatches or settings.max_grep_matches, settings.max_grep_matches)
        context = min(a.contextLines, settings.max_context_lines)
        width, budget = settings.max_line_chars, settings.max_scan_chars
        before: deque[str] = deque(maxlen=context)
        matches: list[GrepMatch] = []
        waiting: list[GrepMatch] = []  # matches still collecting their after-context
        next_line: int | None = None
        stopped: Literal["maxMatches", "scanChars"] | None = None
        scanned = examined = 0
        for number, line in _lines(self._text(record)):
            if number < a.startLine:
                continue
            examined += len(line) + 1
            if examined > budget and scanned:
                next_line, stopped = number, "scanChars"
                break
            shown, cut = line[:width], len(line) > width
            for match in waiting:
                match.after.append(shown)
                match.cut = match.cut or cut
            waiting = [match for match in waiting if len(match.after) < context]
            if pattern.search(line):
                if len(matches) == cap:
                    next_line, stopped = number, "maxMatches"
                    break
                found = GrepMatch(line=number, text=shown, before=list(before), after=[], cut=cut)
                matches.append(found)
                if context:
                    waiting.append(found)
            before.append(shown)
            scanned += 1
        return GrepContentResult(
            file=_ref(record),
            matches=matches,
            scannedLines=scanned,
            nextLine=next_line,
            truncated=next_line is not None,
            stoppedAt=stopped,
            limitMatches=cap,
            limitScanChars=budget,
            lineLimit=width,
        )

    def stats(self, ctx: CallContext, file: str) -> ContentStatsResult:
        record = self._find(ctx, file)
        budget = self._settings.max_scan_chars
        counts: tuple[int, int, int] | None = None
        complete = True
        if self._is_text(record):
            chars = lines = words = 0
            last, in_word = "\n", False
            for chunk in self._text(record):
                piece = chunk[: budget - chars]
                if len(piece) < len(chunk):
                    complete = False
                chars += len(piece)
                lines += piece.count("\n")
                for token in _TOKENS.findall(piece):
                    if token.isspace():
                        in_word = False
                    elif not in_word:
                        words, in_word = words + 1, True
                last = piece[-1] if piece else last
                if not complete:
                    break
            counts = (chars, lines + (0 if last == "\n" else 1), words)
        return ContentStatsResult(
            file=_ref(record),
            kind=record.kind.value,
            contentType=record.content_type,
            size=record.size,
            text=counts is not None,
            chars=counts[0] if counts else None,
            lines=counts[1] if counts else None,
            words=counts[2] if counts else None,
            complete=complete,
            limitScanChars=budget,
        )

    # -- reading --------------------------------------------------------------------------

    def _find(self, ctx: CallContext, file: str) -> FileRecord:
        """A conversation file by id or name, or a knowledge base's content version by
        its id (``cv`` and 16 hex digits: no conversation file id looks like one)."""
        if self._versions is None or not _VERSION_ID.fullmatch(file):
            return self._files.find(ctx, file)
        version, text = self._versions.text(ctx.org, file)
        return _VersionRecord(
            org=ctx.org,
            conversation=ctx.conversation,
            file_id=version.version_id,
            name=version.name,
            size=len(text.encode()),
            content_type="text/plain; charset=utf-8",
            sha256=version.sha256,
            kind=FileKind.KNOWLEDGE,
            created_at=version.created_at,
            text=text,
        )

    def _chunks(self, record: FileRecord) -> Iterator[bytes]:
        if isinstance(record, _VersionRecord):
            data = record.text.encode()
            for start in range(0, len(data), CHUNK_BYTES):
                yield data[start : start + CHUNK_BYTES]
        else:
            yield from self._files.chunks(record)

    def _text_file(self, ctx: CallContext, file: str) -> FileRecord:
        record = self._find(ctx, file)
        if not self._is_text(record):
            msg = (
                f"{record.name!r} ({record.content_type}) is not UTF-8 text; stage it into "
                "the sandbox (runCommand files) to work on it there"
            )
            raise InvalidArguments(msg, file=record.file_id, contentType=record.content_type)
        return record

    def _is_text(self, record: FileRecord) -> bool:
        head = b""
        for chunk in self._chunks(record):
            head += chunk
            if len(head) >= SNIFF_BYTES:
                break
        sample = head[:SNIFF_BYTES]
        if b"\x00" in sample:
            return False
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        try:
            decoder.decode(sample, final=record.size <= SNIFF_BYTES)
        except UnicodeDecodeError:
            return False
        return True

    def _text(self, record: FileRecord) -> Iterator[str]:
        """The file's text, chunk by chunk (a stray invalid byte later on becomes U+FFFD)."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for chunk in self._chunks(record):
            if text := decoder.decode(chunk):
                yield text
        if text := decoder.decode(b"", final=True):
            yield text


_TOKENS = re.compile(r"\s+|\S+")


def _lines(chunks: Iterator[str]) -> Iterator[tuple[int, str]]:
    """(number, line) from 1; a last line without ``\\n`` counts if it has characters."""
    pending, number = "", 0
    for chunk in chunks:
        *whole, pending = (pending + chunk).split("\n")
        for line in whole:
            number += 1
            yield number, line.removesuffix("\r")
    if pending:
        yield number + 1, pending.removesuffix("\r")


def _pattern(a: GrepContentArgs, max_chars: int) -> re.Pattern[str]:
    if len(a.query) > max_chars:
        msg = f"query is {len(a.query)} characters, over the limit of {max_chars}"
        raise InvalidArguments(msg, limit=max_chars, unit="characters")
    flags = 0 if a.caseSensitive else re.IGNORECASE
    try:
        return re.compile(a.query if a.regex else re.escape(a.query), flags)
    except re.error as exc:
        msg = f"query is not a valid regular expression: {exc}"
        raise InvalidArguments(msg) from exc


def _ref(record: FileRecord) -> FileRef:
    return FileRef(fileId=record.file_id, name=record.name)


def _source(record: FileRecord) -> ContentSource:
    return ContentSource(
        fileId=record.file_id,
        name=record.name,
        kind=record.kind.value,
        contentType=record.content_type,
        size=record.size,
        createdAt=record.created_at,
    )
