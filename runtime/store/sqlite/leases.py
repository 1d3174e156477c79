"""Leases in SQLite: the same semantics as in Redis (owner token, TTL, fence from
one growing counter). Waiters are woken in-process by a condition variable, which
is enough because this store serves one process."""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime.store.sqlite.db import Database


class SqliteLeases:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def acquire_lease(self, key: str, owner: str, ttl: float) -> int | None:
        now = self._clock()
        with self._db.transaction() as conn:
            held = conn.execute(
                "SELECT owner FROM leases WHERE key = ? AND expires_at > ?", (key, now)
            ).fetchone()
            if held:
                return None
            conn.execute(
                "INSERT OR REPLACE INTO leases (key, owner, expires_at) VALUES (?, ?, ?)",
                (key, owner, now + ttl),
            )
            fence: int = conn.execute(
                "INSERT INTO counters (name, value) VALUES ('fence', 1) "
                "ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value"
            ).fetchone()[0]
            return fence

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        now = self._clock()
        with self._db.lock:
            cursor = self._db.conn.execute(
                "UPDATE leases SET expires_at = ? WHERE key = ? AND owner = ? AND expires_at > ?",
                (now + ttl, key, owner, now),
            )
        return cursor.rowcount == 1

    def release_lease(self, key: str, owner: str) -> bool:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner)
            )
            self._db.released.notify_all()
        return cursor.rowcount == 1

    def wait_for_release(self, key: str, timeout: float) -> None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT expires_at FROM leases WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                return
            # Wake on a release, or when the holder's TTL runs out (a crashed holder).
            self._db.released.wait(min(timeout, max(0.0, row[0] - self._clock()) + 0.01))

    def lease_owner(self, key: str) -> str | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT owner FROM leases WHERE key = ? AND expires_at > ?", (key, self._clock())
            ).fetchone()
        return str(row[0]) if row else None

    def clear_expired_leases(self) -> int:
        with self._db.lock:
            cursor = self._db.conn.execute(
                "DELETE FROM leases WHERE expires_at <= ?", (self._clock(),)
            )
        return cursor.rowcount
