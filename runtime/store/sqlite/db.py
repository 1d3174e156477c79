"""The SQLite database every concern shares: one connection, one lock.

The service's threads share the connection behind the lock; every statement is
short. Opening it brings its schema up to date (``migrations.py``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runtime.store.sqlite.migrations import migrate


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
            try:
                self.schema_version = migrate(self.conn)
            except BaseException:
                self.conn.close()  # a refused (newer) store keeps no handle open
                raise

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
