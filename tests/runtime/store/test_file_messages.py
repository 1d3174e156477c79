"""A file record keeps the assistant message it belongs to, in both backends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.core.records import FileKind, FileRecord
from runtime.seams.stores import Stores
from runtime.store.sqlite import open_sqlite


def record(file_id: str, message_id: str | None) -> FileRecord:
    return FileRecord(
        org="o",
        conversation="c",
        file_id=file_id,
        name=f"{file_id}.png",
        size=3,
        content_type="image/png",
        sha256="0" * 64,
        kind=FileKind.ARTIFACT,
        created_at=1.0,
        message_id=message_id,
    )


def test_the_message_of_a_file_is_kept(store: Stores) -> None:
    store.files.add_file(record("tied", "msg-1"))
    store.files.add_file(record("loose", None))
    assert store.files.get_file("o", "c", "tied") == record("tied", "msg-1")
    assert store.files.get_file("o", "c", "loose") == record("loose", None)
    assert {f.file_id: f.message_id for f in store.files.list_files("o", "c")} == {
        "tied": "msg-1",
        "loose": None,
    }
    deleted = store.files.delete_files("o", "c")
    assert {f.file_id: f.message_id for f in deleted} == {"tied": "msg-1", "loose": None}


def test_a_database_from_before_messages_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE files (org TEXT NOT NULL, conversation TEXT NOT NULL, "
            "file_id TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL, size INTEGER NOT NULL, "
            "content_type TEXT NOT NULL, sha256 TEXT NOT NULL, kind TEXT NOT NULL, "
            "created_at REAL NOT NULL, editable INTEGER NOT NULL DEFAULT 0)"
        )
        old.execute(
            "INSERT INTO files VALUES ('o', 'c', 'old', 'old.png', 3, 'image/png', ?, "
            "'artifact', 1.0, 0)",
            ("0" * 64,),
        )
    old.close()
    store = open_sqlite(path)
    try:
        assert store.files.get_file("o", "c", "old") == record("old", None)
        store.files.add_file(record("new", "msg-2"))
        assert store.files.get_file("o", "c", "new") == record("new", "msg-2")
    finally:
        store.close()
