"""Conversation files' metadata in SQLite."""

from __future__ import annotations

from dataclasses import astuple

from runtime.core.records import FileKind, FileRecord, StagingCount
from runtime.store.sqlite.db import Database

FILE_COLUMNS = (
    "org, conversation, file_id, name, size, content_type, sha256, kind, created_at, editable, "
    "message_id"
)


class SqliteFiles:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_file(self, record: FileRecord) -> None:
        with self._db.lock:
            self._db.conn.execute(
                f"INSERT INTO files ({FILE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                astuple(record),
            )

    def list_files(self, org: str, conversation: str) -> list[FileRecord]:
        with self._db.lock:
            rows = self._db.conn.execute(
                f"SELECT {FILE_COLUMNS} FROM files WHERE org = ? AND conversation = ? "
                "ORDER BY created_at, rowid",
                (org, conversation),
            ).fetchall()
        return [_file(row) for row in rows]

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        with self._db.lock:
            row = self._db.conn.execute(
                f"SELECT {FILE_COLUMNS} FROM files "
                "WHERE org = ? AND conversation = ? AND file_id = ?",
                (org, conversation, file_id),
            ).fetchone()
        return _file(row) if row else None

    def replace_file(self, record: FileRecord) -> bool:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "UPDATE files SET size = ?, content_type = ?, sha256 = ? "
                "WHERE org = ? AND conversation = ? AND file_id = ?",
                (
                    record.size,
                    record.content_type,
                    record.sha256,
                    record.org,
                    record.conversation,
                    record.file_id,
                ),
            )
        return cursor.rowcount == 1

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        with self._db.transaction() as conn:
            rows = conn.execute(
                f"DELETE FROM files WHERE org = ? AND conversation = ? RETURNING {FILE_COLUMNS}",
                (org, conversation),
            ).fetchall()
            conn.execute(
                "DELETE FROM staged WHERE org = ? AND conversation = ?", (org, conversation)
            )
        return [_file(row) for row in rows]

    def count_staged(
        self, org: str, conversation: str, session_id: str, items: dict[str, int], limit: int
    ) -> StagingCount:
        where = "org = ? AND conversation = ?"
        with self._db.transaction() as conn:
            conn.execute(
                f"DELETE FROM staged WHERE {where} AND session_id != ?",
                (org, conversation, session_id),
            )
            counted = dict(
                conn.execute(f"SELECT item, size FROM staged WHERE {where}", (org, conversation))
            )
            total = sum(int(size) for size in counted.values())
            new = {item: size for item, size in items.items() if item not in counted}
            added = sum(new.values())
            if total + added > limit:
                return StagingCount(accepted=False, total=total, added=added)
            conn.executemany(
                "INSERT INTO staged (org, conversation, session_id, item, size) VALUES (?,?,?,?,?)",
                [(org, conversation, session_id, item, size) for item, size in new.items()],
            )
        return StagingCount(accepted=True, total=total + added, added=added)


def _file(row: tuple[object, ...]) -> FileRecord:
    org, conv, file_id, name, size, content_type, sha256, kind, created, editable, message = row
    return FileRecord(
        org=str(org),
        conversation=str(conv),
        file_id=str(file_id),
        name=str(name),
        size=int(str(size)),
        content_type=str(content_type),
        sha256=str(sha256),
        kind=FileKind(str(kind)),
        created_at=float(str(created)),
        editable=bool(editable),
        message_id=None if message is None else str(message),
    )
