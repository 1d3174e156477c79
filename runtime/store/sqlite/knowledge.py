"""Knowledge bases in SQLite: each base's and version's record as JSON (with the
columns queries need beside it), chunks as rows with their vectors. A version's
chunks and its ``ready`` record are written in one transaction, and so is the
base's ``generation`` bump that tells indexes to build again."""

from __future__ import annotations

import sqlite3

from runtime.core.knowledge_records import ContentVersion, KnowledgeBase, KnowledgeChunk
from runtime.store.sqlite.db import Database


class SqliteKnowledge:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_base(self, base: KnowledgeBase, limit: int) -> bool:
        with self._db.transaction() as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM knowledge_bases WHERE org = ?", (base.org,)
            ).fetchone()
            if count >= limit:
                return False
            conn.execute(
                "INSERT INTO knowledge_bases (org, base_id, created_at, body) VALUES (?, ?, ?, ?)",
                (base.org, base.base_id, base.created_at, base.to_json()),
            )
        return True

    def get_base(self, org: str, base_id: str) -> KnowledgeBase | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM knowledge_bases WHERE org = ? AND base_id = ?", (org, base_id)
            ).fetchone()
        return KnowledgeBase.from_json(str(row[0])) if row else None

    def list_bases(self, org: str) -> list[KnowledgeBase]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM knowledge_bases WHERE org = ? ORDER BY created_at, base_id",
                (org,),
            ).fetchall()
        return [KnowledgeBase.from_json(str(body)) for (body,) in rows]

    def delete_base(self, org: str, base_id: str) -> bool:
        with self._db.transaction() as conn:
            gone = conn.execute(
                "DELETE FROM knowledge_bases WHERE org = ? AND base_id = ?", (org, base_id)
            ).rowcount
            for table in ("knowledge_versions", "knowledge_chunks"):
                conn.execute(f"DELETE FROM {table} WHERE org = ? AND base_id = ?", (org, base_id))
        return gone > 0

    def add_version(self, version: ContentVersion, limit: int) -> bool | None:
        with self._db.transaction() as conn:
            if not _base_exists(conn, version.org, version.base_id):
                return None
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM knowledge_versions WHERE org = ? AND base_id = ?",
                (version.org, version.base_id),
            ).fetchone()
            if count >= limit:
                return False
            conn.execute(
                "INSERT INTO knowledge_versions (org, version_id, base_id, created_at, status, "
                "claimed_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    version.org,
                    version.version_id,
                    version.base_id,
                    version.created_at,
                    version.status,
                    version.claimed_at,
                    version.to_json(),
                ),
            )
        return True

    def get_version(self, org: str, version_id: str) -> ContentVersion | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM knowledge_versions WHERE org = ? AND version_id = ?",
                (org, version_id),
            ).fetchone()
        return ContentVersion.from_json(str(row[0])) if row else None

    def list_versions(self, org: str, base_id: str) -> list[ContentVersion]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM knowledge_versions WHERE org = ? AND base_id = ? "
                "ORDER BY created_at, version_id",
                (org, base_id),
            ).fetchall()
        return [ContentVersion.from_json(str(body)) for (body,) in rows]

    def save_version(self, version: ContentVersion) -> bool:
        with self._db.transaction() as conn:
            return _save(conn, version)

    def claim_version(self, now: float, stale_before: float) -> ContentVersion | None:
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT body FROM knowledge_versions WHERE status = 'queued' "
                "OR (status = 'indexing' AND claimed_at < ?) ORDER BY created_at LIMIT 1",
                (stale_before,),
            ).fetchone()
            if row is None:
                return None
            claimed = ContentVersion.from_json(str(row[0])).but(status="indexing", claimed_at=now)
            _save(conn, claimed)
        return claimed

    def finish_version(
        self, version: ContentVersion, chunks: list[KnowledgeChunk], limit: int
    ) -> bool | None:
        with self._db.transaction() as conn:
            if not conn.execute(
                "SELECT 1 FROM knowledge_versions WHERE org = ? AND version_id = ?",
                (version.org, version.version_id),
            ).fetchone():
                return None
            held = _chunk_count(conn, version.org, version.base_id)
            if held + len(chunks) > limit:
                return False
            conn.execute(
                "DELETE FROM knowledge_chunks WHERE org = ? AND version_id = ?",
                (version.org, version.version_id),
            )
            conn.executemany(
                "INSERT INTO knowledge_chunks (org, base_id, version_id, seq, heading, text, "
                "start, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        version.org,
                        version.base_id,
                        c.version_id,
                        c.seq,
                        c.heading,
                        c.text,
                        c.start,
                        c.vector,
                    )
                    for c in chunks
                ],
            )
            _save(conn, version)
            _bump(conn, version.org, version.base_id)
        return True

    def delete_version(self, org: str, base_id: str, version_id: str) -> bool:
        with self._db.transaction() as conn:
            gone = conn.execute(
                "DELETE FROM knowledge_versions WHERE org = ? AND base_id = ? AND version_id = ?",
                (org, base_id, version_id),
            ).rowcount
            conn.execute(
                "DELETE FROM knowledge_chunks WHERE org = ? AND version_id = ?", (org, version_id)
            )
            if gone:
                _bump(conn, org, base_id)
        return gone > 0

    def chunks(self, org: str, base_id: str) -> list[KnowledgeChunk]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT version_id, seq, heading, text, start, vector FROM knowledge_chunks "
                "WHERE org = ? AND base_id = ? ORDER BY version_id, seq",
                (org, base_id),
            ).fetchall()
        return [
            KnowledgeChunk(str(v), int(seq), str(h), str(t), int(start), bytes(vector))
            for v, seq, h, t, start, vector in rows
        ]

    def chunk_count(self, org: str, base_id: str) -> int:
        with self._db.lock:
            return _chunk_count(self._db.conn, org, base_id)

    def generation(self, org: str, base_id: str) -> int:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT generation FROM knowledge_bases WHERE org = ? AND base_id = ?",
                (org, base_id),
            ).fetchone()
        return int(row[0]) if row else 0


def _base_exists(conn: sqlite3.Connection, org: str, base_id: str) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM knowledge_bases WHERE org = ? AND base_id = ?", (org, base_id)
        ).fetchone()
    )


def _save(conn: sqlite3.Connection, version: ContentVersion) -> bool:
    return (
        conn.execute(
            "UPDATE knowledge_versions SET status = ?, claimed_at = ?, body = ? "
            "WHERE org = ? AND version_id = ?",
            (
                version.status,
                version.claimed_at,
                version.to_json(),
                version.org,
                version.version_id,
            ),
        ).rowcount
        > 0
    )


def _bump(conn: sqlite3.Connection, org: str, base_id: str) -> None:
    conn.execute(
        "UPDATE knowledge_bases SET generation = generation + 1 WHERE org = ? AND base_id = ?",
        (org, base_id),
    )


def _chunk_count(conn: sqlite3.Connection, org: str, base_id: str) -> int:
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM knowledge_chunks WHERE org = ? AND base_id = ?", (org, base_id)
    ).fetchone()
    return int(count)
