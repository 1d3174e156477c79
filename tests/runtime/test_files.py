"""Conversation files over the SQLite store and the local blob store."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest, MissingInput, NotFound, TransferTooLarge
from runtime.files.conversation import ConversationFiles, LocalBlobStore, content_type_for
from runtime.files.settings import FileSettings
from runtime.store.sqlite import open_sqlite

CTX = CallContext("org", "user", "conv")


@pytest.fixture
def files(tmp_path: Path) -> Iterator[ConversationFiles]:
    store = open_sqlite(tmp_path / "siesta.db")
    yield ConversationFiles(
        store.files, LocalBlobStore(tmp_path / "blobs"), FileSettings(max_upload_bytes=100)
    )
    store.close()


def test_upload_streams_hashes_and_reads_back(files: ConversationFiles) -> None:
    record = files.upload(CTX, "a.csv", None, iter([b"ab", b"c"]))
    assert (record.size, record.content_type, record.kind.value) == (3, "text/csv", "attachment")
    assert record.sha256 == hashlib.sha256(b"abc").hexdigest()
    assert b"".join(files.chunks(files.get(CTX, record.file_id))) == b"abc"


def test_upload_over_the_limit_leaves_nothing(files: ConversationFiles, tmp_path: Path) -> None:
    with pytest.raises(TransferTooLarge) as caught:
        files.upload(CTX, "big.bin", None, iter([b"x" * 60, b"x" * 60]))
    assert caught.value.fields["limit"] == 100
    assert files.list_files(CTX) == []
    assert [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "a\nb", "x" * 256])
def test_bad_file_names_are_refused(files: ConversationFiles, name: str) -> None:
    with pytest.raises(InvalidRequest):
        files.upload(CTX, name, None, iter([b"x"]))


def test_resolve_by_name_takes_the_newest_and_by_id_the_exact_one(
    files: ConversationFiles,
) -> None:
    old = files.upload(CTX, "r.txt", None, iter([b"1"]))
    new = files.upload(CTX, "r.txt", None, iter([b"22"]))
    assert [r.file_id for r in files.resolve(CTX, ["r.txt"])] == [new.file_id]
    assert [r.file_id for r in files.resolve(CTX, [old.file_id, "r.txt", new.file_id])] == [
        old.file_id,
        new.file_id,
    ]


def test_resolve_names_every_missing_input(files: ConversationFiles) -> None:
    files.upload(CTX, "here.txt", None, iter([b"1"]))
    with pytest.raises(MissingInput) as caught:
        files.resolve(CTX, ["gone.txt", "here.txt", "also-gone"])
    assert caught.value.fields["missing"] == ["gone.txt", "also-gone"]
    assert "here.txt" in caught.value.message


def test_other_conversations_cannot_get_a_file(files: ConversationFiles) -> None:
    record = files.upload(CTX, "a.txt", None, iter([b"1"]))
    with pytest.raises(NotFound):
        files.get(CallContext("other-org", "user", "conv"), record.file_id)


def test_delete_all_removes_blobs(files: ConversationFiles, tmp_path: Path) -> None:
    files.upload(CTX, "a.txt", None, iter([b"1"]))
    files.upload(CallContext("org", "user", "keep"), "b.txt", None, iter([b"2"]))
    assert files.delete_all(CTX.org, CTX.conversation) == 1
    assert len([p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]) == 1


def test_blob_ids_cannot_be_paths(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path)
    with pytest.raises(ValueError, match="bad blob id"):
        blobs.open("../../etc/passwd")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.png", "image/png"),
        ("report.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        ("noext", "application/octet-stream"),
        ("x.csv", "text/csv"),
    ],
)
def test_content_types(name: str, expected: str) -> None:
    assert content_type_for(name) == expected
