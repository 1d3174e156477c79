"""Conversation files: attachments the backend uploads, artifacts the agent publishes.

Metadata lives in the ``Store`` (keyed by org and conversation, like sessions);
bytes live in a ``BlobStore`` under the file's random id, never under a name
or id that came from a caller. Bytes are always streamed, never held whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO, Protocol

from siesta_contract.text import MAX_FILE_NAME_CHARS, is_file_name

from runtime.core.context import CallContext
from runtime.core.errors import (
    FileNotEditable,
    InvalidFileName,
    MissingInput,
    NotFound,
    TransferTooLarge,
)
from runtime.core.records import FileKind, FileRecord, StagingCount
from runtime.files.settings import FileSettings
from runtime.seams.stores import FileStore

CHUNK = 64 * 1024


class BlobWriter:
    """Bytes being written to a blob; counts and hashes them on the way."""

    def __init__(self, handle: BinaryIO, limit: int | None, too_large: Callable[[], Exception]):
        self._handle = handle
        self._limit = limit
        self._too_large = too_large
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._limit is not None and self.size > self._limit:
            raise self._too_large()
        self._hash.update(chunk)
        self._handle.write(chunk)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


class BlobStore(Protocol):
    """Where file bytes live. The embedded default is the local filesystem."""

    def writer(
        self, blob_id: str, limit: int | None, too_large: Callable[[], Exception]
    ) -> contextlib.AbstractContextManager[BlobWriter]:
        """Write a new blob; it exists only if the block ends without an error."""

    def open(self, blob_id: str) -> BinaryIO:
        """Read a blob."""

    def delete(self, blob_id: str) -> None:
        """Remove a blob; a missing one is not an error."""


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self._root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, blob_id: str) -> Path:
        if not blob_id.isalnum():  # ids are ours (uuid hex); refuse anything path-like
            msg = f"bad blob id {blob_id!r}"
            raise ValueError(msg)
        return self._root / blob_id[:2] / blob_id

    @contextlib.contextmanager
    def writer(
        self, blob_id: str, limit: int | None, too_large: Callable[[], Exception]
    ) -> Iterator[BlobWriter]:
        final = self._path(blob_id)
        final.parent.mkdir(exist_ok=True)
        temp = final.with_suffix(".part")
        try:
            with temp.open("wb") as handle:
                yield BlobWriter(handle, limit, too_large)
            os.replace(temp, final)
        finally:
            temp.unlink(missing_ok=True)

    def open(self, blob_id: str) -> BinaryIO:
        return self._path(blob_id).open("rb")

    def delete(self, blob_id: str) -> None:
        self._path(blob_id).unlink(missing_ok=True)


def content_type_for(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def check_file_name(name: str) -> str:
    """Display names of files: any text without folders or control characters."""
    if not is_file_name(name):
        msg = (
            f"file name {name[:80]!r} must be 1 to {MAX_FILE_NAME_CHARS} characters without "
            "/ \\ or control characters, and not only dots and spaces"
        )
        raise InvalidFileName(msg, limit=MAX_FILE_NAME_CHARS)
    return name


class ConversationFiles:
    def __init__(
        self,
        store: FileStore,
        blobs: BlobStore,
        settings: FileSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._settings = settings
        self._clock = clock

    @property
    def settings(self) -> FileSettings:
        return self._settings

    def add(
        self,
        ctx: CallContext,
        name: str,
        content_type: str | None,
        kind: FileKind,
        fill: Callable[[BlobWriter], None],
        limit: int,
        *,
        editable: bool = False,
        message_id: str | None = None,
    ) -> FileRecord:
        """Store a new file whose bytes ``fill`` writes; over ``limit`` nothing is kept.
        An artifact belongs to ``message_id``, else to the call's assistant message."""
        check_file_name(name)
        file_id = uuid.uuid4().hex

        def too_large() -> TransferTooLarge:
            msg = f"{name!r} is over the limit of {limit} bytes per file"
            return TransferTooLarge(msg, limit=limit, unit="bytes", name=name)

        with self._blobs.writer(file_id, limit, too_large) as writer:
            fill(writer)
        record = FileRecord(
            org=ctx.org,
            conversation=ctx.conversation,
            file_id=file_id,
            name=name,
            size=writer.size,
            content_type=content_type or content_type_for(name),
            sha256=writer.sha256,
            kind=kind,
            created_at=self._clock(),
            editable=editable,
            message_id=message_id
            if message_id is not None or kind is not FileKind.ARTIFACT
            else ctx.message,
        )
        try:
            self._store.add_file(record)
        except BaseException:
            self._blobs.delete(file_id)
            raise
        return record

    def upload(
        self, ctx: CallContext, name: str, content_type: str | None, chunks: Iterable[bytes]
    ) -> FileRecord:
        def fill(writer: BlobWriter) -> None:
            for chunk in chunks:
                writer.write(chunk)

        return self.add(
            ctx, name, content_type, FileKind.ATTACHMENT, fill, self._settings.max_upload_bytes
        )

    def list_files(self, ctx: CallContext) -> list[FileRecord]:
        return self._store.list_files(ctx.org, ctx.conversation)

    def get(self, ctx: CallContext, file_id: str) -> FileRecord:
        record = self._store.get_file(ctx.org, ctx.conversation, file_id)
        if record is None:
            msg = f"conversation {ctx.conversation!r} has no file {file_id!r}"
            raise NotFound(msg)
        return record

    def chunks(self, record: FileRecord) -> Iterator[bytes]:
        with self._blobs.open(record.file_id) as handle:
            while chunk := handle.read(CHUNK):
                yield chunk

    def resolve(self, ctx: CallContext, names_or_ids: list[str]) -> list[FileRecord]:
        """The conversation files named (by id, or by name: the newest of that name)."""
        files = self.list_files(ctx)
        by_id = {f.file_id: f for f in files}
        by_name = {f.name: f for f in files}  # oldest first, so the newest wins
        found, missing, seen = [], [], set()
        for wanted in names_or_ids:
            record = by_id.get(wanted) or by_name.get(wanted)
            if record is None:
                missing.append(wanted)
            elif record.file_id not in seen:
                seen.add(record.file_id)
                found.append(record)
        if missing:
            available = ", ".join(sorted(by_name)) or "none"
            msg = (
                f"no conversation file named {', '.join(map(repr, missing))} "
                f"(available: {available}); upload it or publish it first"
            )
            raise MissingInput(msg, missing=missing)
        return found

    def find(self, ctx: CallContext, name_or_id: str) -> FileRecord:
        """One conversation file by id, or by name (the newest of that name)."""
        return self.resolve(ctx, [name_or_id])[0]

    def read_bytes(self, record: FileRecord, limit: int) -> bytes:
        if record.size > limit:
            msg = f"{record.name!r} is {record.size} bytes, over the limit of {limit} bytes"
            raise TransferTooLarge(msg, limit=limit, unit="bytes", name=record.name)
        return b"".join(self.chunks(record))

    def add_bytes(
        self,
        ctx: CallContext,
        name: str,
        kind: FileKind,
        data: bytes,
        *,
        editable: bool = False,
        message_id: str | None = None,
    ) -> FileRecord:
        def fill(writer: BlobWriter) -> None:
            writer.write(data)

        limit = self._settings.max_upload_bytes
        return self.add(
            ctx, name, None, kind, fill, limit, editable=editable, message_id=message_id
        )

    def replace_content(self, ctx: CallContext, file_id: str, data: bytes) -> FileRecord:
        """New bytes for a file created for editing; any other file is refused."""
        record = self.get(ctx, file_id)
        if not record.editable:
            msg = f"file {file_id!r} ({record.name!r}) was not created for editing"
            raise FileNotEditable(msg)
        limit = self._settings.max_upload_bytes

        def too_large() -> TransferTooLarge:
            msg = f"new content is over the limit of {limit} bytes per file"
            return TransferTooLarge(msg, limit=limit, unit="bytes")

        with self._blobs.writer(record.file_id, limit, too_large) as writer:
            writer.write(data)
        updated = replace(record, size=writer.size, sha256=writer.sha256)
        self._store.replace_file(updated)
        return updated

    def count_staged(
        self, ctx: CallContext, session_id: str, records: list[FileRecord], limit: int
    ) -> StagingCount:
        """Count files staged into the conversation's sandbox against ``limit``
        (all or nothing; the same file with the same bytes counts once per session)."""
        items = {record.staging_key: record.size for record in records}
        return self._store.count_staged(ctx.org, ctx.conversation, session_id, items, limit)

    def delete_all(self, org: str, conversation: str) -> int:
        records = self._store.delete_files(org, conversation)
        for record in records:
            self._blobs.delete(record.file_id)
        return len(records)
