"""Idempotency keys in SQLite: one row per key, on ``clock``.

A row lives until ``expires_at`` (the TTL from its first claim, then from its
answer); a running claim is held until ``held_until``. A row whose hold lapsed is
taken over by the next claim with the same request (``attempt`` goes up).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime.core.records import IdempotencyClaim, IdempotencyEntry, KeptResponse
from runtime.store.sqlite.db import Database


class SqliteIdempotency:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def claim_key(
        self,
        key: str,
        fingerprint: str,
        owner: str,
        hold: float,
        *,
        ttl: float,
        conversation: str | None = None,
    ) -> IdempotencyClaim | IdempotencyEntry:
        now = self._clock()
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,))
            row = conn.execute(
                "SELECT fingerprint, status, content_type, body, kept, held_until, attempt, "
                "dispatched FROM idempotency WHERE key = ?",
                (key,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency (key, fingerprint, owner, expires_at, held_until, "
                    "attempt, conversation) VALUES (?, ?, ?, ?, ?, 1, ?)",
                    (key, fingerprint, owner, now + max(ttl, hold), now + hold, conversation),
                )
                return IdempotencyClaim(1)
            kept_fingerprint, status, content_type, body, kept, held_until, attempt, target = row
            lapsed = status is None and (held_until or 0) <= now
            if lapsed and kept_fingerprint == fingerprint:
                conn.execute(
                    "UPDATE idempotency SET owner = ?, held_until = ?, attempt = ? WHERE key = ?",
                    (owner, now + hold, (attempt or 1) + 1, key),
                )
                return IdempotencyClaim((attempt or 1) + 1, target)
        response = None
        if status is not None:
            response = KeptResponse(int(status), str(content_type), bytes(body) if kept else None)
        return IdempotencyEntry(str(kept_fingerprint), response)

    def renew_key(self, key: str, owner: str, hold: float) -> bool:
        return self._update_running(key, owner, "held_until = ?", self._clock() + hold)

    def mark_dispatched(self, key: str, owner: str, target: str) -> bool:
        return self._update_running(key, owner, "dispatched = ?", target)

    def complete_key(self, key: str, owner: str, response: KeptResponse, ttl: float) -> bool:
        now = self._clock()
        with self._db.lock:
            cursor = self._db.conn.execute(
                "UPDATE idempotency SET expires_at = ?, held_until = NULL, status = ?, "
                "content_type = ?, body = ?, kept = ? "
                "WHERE key = ? AND owner = ? AND status IS NULL AND expires_at > ?",
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
        with self._db.transaction() as conn:
            # Work handed over stays on record: the retry takes over and collects it.
            handed = conn.execute(
                "UPDATE idempotency SET held_until = 0 WHERE key = ? AND owner = ? "
                "AND status IS NULL AND dispatched IS NOT NULL",
                (key, owner),
            ).rowcount
            dropped = conn.execute(
                "DELETE FROM idempotency WHERE key = ? AND owner = ? AND status IS NULL "
                "AND dispatched IS NULL",
                (key, owner),
            ).rowcount
        return handed + dropped == 1

    def forget_conversation(self, conversation: str) -> int:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "DELETE FROM idempotency WHERE conversation = ?", (conversation,)
            )
        return cursor.rowcount

    def _update_running(self, key: str, owner: str, assignment: str, value: object) -> bool:
        now = self._clock()
        with self._db.lock:
            cursor = self._db.conn.execute(
                f"UPDATE idempotency SET {assignment} WHERE key = ? AND owner = ? "
                "AND status IS NULL AND expires_at > ?",
                (value, key, owner, now),
            )
        return cursor.rowcount == 1
