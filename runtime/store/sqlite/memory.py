"""Memory banks in SQLite: a bank's record as JSON, its entries as rows whose
autoincrement ``seq`` is the order they were added in."""

from __future__ import annotations

import sqlite3
from typing import Any

from runtime.core.records import MemoryBank, MemoryEntry
from runtime.store.sqlite.db import Database

_COLUMNS = "org, bank_id, key, entry_id, content, speaker, created_at, embedding, vector"


class SqliteMemory:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_bank(self, bank: MemoryBank, limit: int) -> bool:
        with self._db.transaction() as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM memory_banks WHERE org = ?", (bank.org,)
            ).fetchone()
            if count >= limit:
                return False
            conn.execute(
                "INSERT INTO memory_banks (org, bank_id, created_at, body) VALUES (?, ?, ?, ?)",
                (bank.org, bank.bank_id, bank.created_at, bank.to_json()),
            )
        return True

    def get_bank(self, org: str, bank_id: str) -> MemoryBank | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM memory_banks WHERE org = ? AND bank_id = ?", (org, bank_id)
            ).fetchone()
        return MemoryBank.from_json(str(row[0])) if row else None

    def list_banks(self, org: str) -> list[MemoryBank]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM memory_banks WHERE org = ? ORDER BY created_at, bank_id", (org,)
            ).fetchall()
        return [MemoryBank.from_json(str(body)) for (body,) in rows]

    def delete_bank(self, org: str, bank_id: str) -> bool:
        with self._db.transaction() as conn:
            gone = conn.execute(
                "DELETE FROM memory_banks WHERE org = ? AND bank_id = ?", (org, bank_id)
            ).rowcount
            conn.execute("DELETE FROM memory_entries WHERE org = ? AND bank_id = ?", (org, bank_id))
        return gone > 0

    def add_entry(self, entry: MemoryEntry, limit: int) -> int | None:
        with self._db.transaction() as conn:
            if not conn.execute(
                "SELECT 1 FROM memory_banks WHERE org = ? AND bank_id = ?",
                (entry.org, entry.bank_id),
            ).fetchone():
                return None
            count = self._count(conn, entry.org, entry.bank_id, entry.key)
            if count >= limit:
                return 0
            conn.execute(
                f"INSERT INTO memory_entries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.org,
                    entry.bank_id,
                    entry.key,
                    entry.entry_id,
                    entry.content,
                    entry.speaker,
                    entry.created_at,
                    entry.embedding,
                    entry.vector,
                ),
            )
        return count + 1

    def entries(
        self, org: str, bank_id: str, key: str, *, newest_first: bool, limit: int
    ) -> tuple[list[MemoryEntry], int]:
        direction = "DESC" if newest_first else "ASC"
        with self._db.lock:
            rows = self._db.conn.execute(
                f"SELECT {_COLUMNS} FROM memory_entries WHERE org = ? AND bank_id = ? "
                f"AND key = ? ORDER BY seq {direction} LIMIT ?",
                (org, bank_id, key, limit),
            ).fetchall()
            total = self._count(self._db.conn, org, bank_id, key)
        return [_entry(row) for row in rows], total

    @staticmethod
    def _count(conn: sqlite3.Connection, org: str, bank_id: str, key: str) -> int:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM memory_entries WHERE org = ? AND bank_id = ? AND key = ?",
            (org, bank_id, key),
        ).fetchone()
        return int(count)


def _entry(row: tuple[Any, ...]) -> MemoryEntry:
    org, bank_id, key, entry_id, content, speaker, created_at, embedding, vector = row
    return MemoryEntry(
        org, bank_id, key, entry_id, content, speaker, float(created_at), embedding, bytes(vector)
    )
