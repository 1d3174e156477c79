"""Idempotency keys in SQLite: one row per key, expired by ``expires_at`` on ``clock``."""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime.store.records import IdempotencyEntry, KeptResponse
from runtime.store.sqlite.db import Database


class SqliteIdempotency:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def claim_key(
        self, key: str, fingerprint: str, owner: str, hold: float
    ) -> IdempotencyEntry | None:
        now = self._clock()
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,))
            row = conn.execute(
                "SELECT fingerprint, status, content_type, body, kept FROM idempotency "
                "WHERE key = ?",
                (key,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency (key, fingerprint, owner, expires_at) "
                    "VALUES (?, ?, ?, ?)",
                    (key, fingerprint, owner, now + hold),
                )
                return None
        fingerprint_kept, status, content_type, body, kept = row
        response = None
        if status is not None:
            response = KeptResponse(int(status), str(content_type), bytes(body) if kept else None)
        return IdempotencyEntry(str(fingerprint_kept), response)

    def renew_key(self, key: str, owner: str, hold: float) -> bool:
        now = self._clock()
        with self._db.lock:
            cursor = self._db.conn.execute(
                "UPDATE idempotency SET expires_at = ? WHERE key = ? AND owner = ? "
                "AND status IS NULL AND expires_at > ?",
                (now + hold, key, owner, now),
            )
        return cursor.rowcount == 1

    def complete_key(self, key: str, owner: str, response: KeptResponse, ttl: float) -> bool:
        now = self._clock()
        with self._db.lock:
            cursor = self._db.conn.execute(
                "UPDATE idempotency SET expires_at = ?, status = ?, content_type = ?, body = ?, "
                "kept = ? WHERE key = ? AND owner = ? AND status IS NULL AND expires_at > ?",
                (
                    now + ttl,
                    response.status,
                    response.content_type,
                    response.body,
                    response.body is not None,
                    key,
                    owner,
                    now,
                ),
            )
        return cursor.rowcount == 1

    def release_key(self, key: str, owner: str) -> bool:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "DELETE FROM idempotency WHERE key = ? AND owner = ? AND status IS NULL",
                (key, owner),
            )
        return cursor.rowcount == 1
