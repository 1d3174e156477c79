"""Revoked egress credentials in SQLite: one row per deletion, read on by its number.

``AUTOINCREMENT`` numbers rows in the order their transactions commit (writers take
the database one at a time) and never reuses a number, so a reader that remembers
the last number it saw misses nothing and sees nothing twice.
"""

from __future__ import annotations

from runtime.core.records import EgressRevocation
from runtime.store.sqlite.db import Database


class SqliteRevocations:
    def __init__(self, db: Database) -> None:
        self._db = db

    def revoke_egress(self, revocation: EgressRevocation, keep_seconds: float) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO egress_revocations (org, conversation, revoked_at) VALUES (?, ?, ?)",
                (revocation.org, revocation.conversation, revocation.revoked_at),
            )
            conn.execute(
                "DELETE FROM egress_revocations WHERE revoked_at < ?",
                (revocation.revoked_at - keep_seconds,),
            )

    def egress_revocations(
        self, after: str | None, limit: int
    ) -> tuple[list[EgressRevocation], str | None]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT seq, org, conversation, revoked_at FROM egress_revocations "
                "WHERE seq > ? ORDER BY seq LIMIT ?",
                (int(after or 0), limit),
            ).fetchall()
        found = [EgressRevocation(str(org), str(conv), float(at)) for _, org, conv, at in rows]
        return found, str(rows[-1][0]) if rows else after
