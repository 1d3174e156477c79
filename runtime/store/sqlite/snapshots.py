"""Snapshot records in SQLite (the record as JSON, keyed by org)."""

from __future__ import annotations

from runtime.core.records import SnapshotRecord
from runtime.store.sqlite.db import Database


class SqliteSnapshots:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_snapshot(self, record: SnapshotRecord, limit: int) -> bool:
        with self._db.lock:
            (count,) = self._db.conn.execute(
                "SELECT COUNT(*) FROM snapshots WHERE org = ?", (record.org,)
            ).fetchone()
            if count >= limit:
                return False
            self._db.conn.execute(
                "INSERT INTO snapshots (org, snapshot_id, created_at, body) VALUES (?, ?, ?, ?)",
                (record.org, record.snapshot_id, record.created_at, record.to_json()),
            )
        return True

    def get_snapshot(self, org: str, snapshot_id: str) -> SnapshotRecord | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM snapshots WHERE org = ? AND snapshot_id = ?", (org, snapshot_id)
            ).fetchone()
        return SnapshotRecord.from_json(str(row[0])) if row else None

    def list_snapshots(self, org: str) -> list[SnapshotRecord]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM snapshots WHERE org = ? ORDER BY created_at, snapshot_id",
                (org,),
            ).fetchall()
        return [SnapshotRecord.from_json(str(body)) for (body,) in rows]

    def delete_snapshot(self, org: str, snapshot_id: str) -> SnapshotRecord | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "DELETE FROM snapshots WHERE org = ? AND snapshot_id = ? RETURNING body",
                (org, snapshot_id),
            ).fetchone()
        return SnapshotRecord.from_json(str(row[0])) if row else None

    def snapshot_ids(self) -> set[str]:
        with self._db.lock:
            rows = self._db.conn.execute("SELECT snapshot_id FROM snapshots").fetchall()
        return {str(snapshot_id) for (snapshot_id,) in rows}
