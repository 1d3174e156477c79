"""The SQLite database every concern shares: one connection, one lock.

The service's threads share the connection behind the lock; every statement is
short.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    org TEXT NOT NULL, conversation TEXT NOT NULL, session_id TEXT NOT NULL UNIQUE,
    sandbox_id TEXT NOT NULL, image_id TEXT NOT NULL, image_ref TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL, last_used_at REAL NOT NULL,
    generation INTEGER NOT NULL, user TEXT NOT NULL, fence INTEGER NOT NULL,
    PRIMARY KEY (org, conversation)
);
CREATE TABLE IF NOT EXISTS files (
    org TEXT NOT NULL, conversation TEXT NOT NULL, file_id TEXT NOT NULL PRIMARY KEY,
    name TEXT NOT NULL, size INTEGER NOT NULL, content_type TEXT NOT NULL,
    sha256 TEXT NOT NULL, kind TEXT NOT NULL, created_at REAL NOT NULL,
    editable INTEGER NOT NULL DEFAULT 0, message_id TEXT
);
CREATE INDEX IF NOT EXISTS files_by_conversation ON files (org, conversation, created_at);
CREATE TABLE IF NOT EXISTS staged (
    org TEXT NOT NULL, conversation TEXT NOT NULL, session_id TEXT NOT NULL,
    item TEXT NOT NULL, size INTEGER NOT NULL, PRIMARY KEY (org, conversation, item)
);
CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS deleted (key TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS egress_revocations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, org TEXT NOT NULL, conversation TEXT NOT NULL,
    revoked_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS egress_revocations_by_time ON egress_revocations (revoked_at);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pool (
    sandbox_id TEXT PRIMARY KEY, image_id TEXT NOT NULL, session_id TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS e2b_sandboxes (
    org TEXT NOT NULL, sandbox_id TEXT NOT NULL, started_at REAL NOT NULL,
    end_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (org, sandbox_id)
);
CREATE INDEX IF NOT EXISTS e2b_sandboxes_by_end ON e2b_sandboxes (end_at);
CREATE INDEX IF NOT EXISTS e2b_sandboxes_by_id ON e2b_sandboxes (sandbox_id);
CREATE TABLE IF NOT EXISTS snapshots (
    org TEXT NOT NULL, snapshot_id TEXT NOT NULL, created_at REAL NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (org, snapshot_id)
);
CREATE TABLE IF NOT EXISTS memory_banks (
    org TEXT NOT NULL, bank_id TEXT NOT NULL, created_at REAL NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (org, bank_id)
);
CREATE TABLE IF NOT EXISTS memory_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, org TEXT NOT NULL, bank_id TEXT NOT NULL,
    key TEXT NOT NULL, entry_id TEXT NOT NULL, content TEXT NOT NULL, speaker TEXT,
    created_at REAL NOT NULL, embedding TEXT NOT NULL, vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_entries_by_key ON memory_entries (org, bank_id, key, seq);
CREATE TABLE IF NOT EXISTS pool_arrivals (image_id TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS pool_arrivals_by_image ON pool_arrivals (image_id, at);
CREATE TABLE IF NOT EXISTS tool_executions (
    id TEXT PRIMARY KEY, org TEXT NOT NULL, conversation TEXT NOT NULL,
    agent_id TEXT NOT NULL, function TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_executions_by_org ON tool_executions (org, created_at);
CREATE INDEX IF NOT EXISTS tool_executions_pending ON tool_executions (status)
    WHERE status = 'pending_approval';
CREATE INDEX IF NOT EXISTS tool_executions_by_time ON tool_executions (created_at);
CREATE INDEX IF NOT EXISTS tool_executions_by_conversation
    ON tool_executions (org, conversation);
CREATE TABLE IF NOT EXISTS cancelled_approvals (
    org TEXT NOT NULL, id TEXT NOT NULL, until REAL NOT NULL, PRIMARY KEY (org, id)
);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, owner TEXT NOT NULL,
    expires_at REAL NOT NULL, status INTEGER, content_type TEXT, body BLOB, kept INTEGER,
    held_until REAL, attempt INTEGER NOT NULL DEFAULT 1, dispatched TEXT, conversation TEXT
);
CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency (expires_at);
CREATE TABLE IF NOT EXISTS slots (scope TEXT NOT NULL, member TEXT NOT NULL,
                                  PRIMARY KEY (scope, member));
"""


class Database:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.lock = threading.Lock()
        self.released = threading.Condition(self.lock)
        """Notified when a lease is released (leases wait on it)."""
        with self.lock:
            self.conn.execute("PRAGMA journal_mode=WAL")
            # WAL with synchronous=NORMAL: a commit is not fsynced; a power cut may lose
            # the last commits but never corrupts the file. What it holds is leases,
            # last-use times and records that reconciliation can rebuild (orphans).
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA busy_timeout=5000")
            self.conn.executescript(SCHEMA)
            self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        # Stores created before leases existed have sessions without these.
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(sessions)")}
        for name, ddl in (
            ("user", "TEXT NOT NULL DEFAULT ''"),
            ("fence", "INTEGER NOT NULL DEFAULT 0"),
        ):
            if name not in columns:
                self.conn.execute(f"ALTER TABLE sessions ADD COLUMN {name} {ddl}")
        # Files before artifacts were tied to assistant messages.
        file_columns = {row[1] for row in self.conn.execute("PRAGMA table_info(files)")}
        if "message_id" not in file_columns:
            self.conn.execute("ALTER TABLE files ADD COLUMN message_id TEXT")
        # Idempotency keys before a claim's hold was apart from its entry's life.
        key_columns = {row[1] for row in self.conn.execute("PRAGMA table_info(idempotency)")}
        for name, ddl in (
            ("held_until", "REAL"),
            ("attempt", "INTEGER NOT NULL DEFAULT 1"),
            ("dispatched", "TEXT"),
            ("conversation", "TEXT"),
        ):
            if name not in key_columns:
                self.conn.execute(f"ALTER TABLE idempotency ADD COLUMN {name} {ddl}")
        self.conn.execute(
            "CREATE INDEX IF NOT EXISTS idempotency_by_conversation ON idempotency (conversation)"
        )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def ping(self) -> None:
        with self.lock:
            self.conn.execute("SELECT 1")

    def close(self) -> None:
        with self.lock:
            self.conn.close()
