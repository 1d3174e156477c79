"""The warm pool's members in SQLite."""

from __future__ import annotations

from runtime.core.records import PoolMember
from runtime.store.sqlite.db import Database

COLUMNS = "image_id, sandbox_id, session_id, created_at"


class SqlitePool:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_pool_member(self, member: PoolMember) -> None:
        with self._db.lock:
            self._db.conn.execute(
                f"INSERT OR REPLACE INTO pool ({COLUMNS}) VALUES (?, ?, ?, ?)",
                (member.image_id, member.sandbox_id, member.session_id, member.created_at),
            )

    def claim_pool_member(self, image_id: str) -> PoolMember | None:
        with self._db.transaction() as conn:
            row = conn.execute(
                f"DELETE FROM pool WHERE sandbox_id = (SELECT sandbox_id FROM pool "
                f"WHERE image_id = ? ORDER BY created_at LIMIT 1) RETURNING {COLUMNS}",
                (image_id,),
            ).fetchone()
        return _member(row) if row else None

    def remove_pool_member(self, sandbox_id: str) -> bool:
        with self._db.lock:
            cursor = self._db.conn.execute("DELETE FROM pool WHERE sandbox_id = ?", (sandbox_id,))
        return cursor.rowcount == 1

    def pool_members(self) -> list[PoolMember]:
        with self._db.lock:
            rows = self._db.conn.execute(
                f"SELECT {COLUMNS} FROM pool ORDER BY created_at"
            ).fetchall()
        return [_member(row) for row in rows]

    def note_pool_arrival(self, image_id: str, at: float, forget_before: float) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM pool_arrivals WHERE at < ?", (forget_before,))
            conn.execute("INSERT INTO pool_arrivals (image_id, at) VALUES (?, ?)", (image_id, at))

    def pool_arrivals(self, image_id: str, since: float) -> list[float]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT at FROM pool_arrivals WHERE image_id = ? AND at >= ? ORDER BY at",
                (image_id, since),
            ).fetchall()
        return [float(at) for (at,) in rows]


def _member(row: tuple[object, ...]) -> PoolMember:
    image_id, sandbox_id, session_id, created_at = row
    return PoolMember(str(image_id), str(sandbox_id), str(session_id), float(str(created_at)))
