"""The SQLite store's schema versions: a 0.1.0 file (no version) is upgraded with all
its data, ends like a new file, migrations run once and in order, a failing one
changes nothing, two openers migrate once, and a file from a newer release is refused."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from runtime.core.errors import StoreSchemaTooNew
from runtime.store.sqlite import open_sqlite
from runtime.store.sqlite.migrations import MIGRATIONS, migrate
from tests.runtime.store import release_0_1_0


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        (found,) = conn.execute("PRAGMA user_version").fetchone()
    conn.close()
    return int(found)


def schema(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's and index's columns (name, type, not null, default, key)."""
    with sqlite3.connect(path) as conn:
        names = conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'index') "
            "AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        found = {
            name: [row[1:] for row in conn.execute(f"PRAGMA index_xinfo({name})")]
            + [row[1:] for row in conn.execute(f"PRAGMA table_info({name})")]
            for (name,) in names
        }
    conn.close()
    return found


def release_0_1_0_file(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.executescript((release_0_1_0.FIXTURES / "store_v0.sql").read_text())
    conn.close()
    return path


def test_a_0_1_0_store_is_upgraded_with_all_its_data(tmp_path: Path) -> None:
    path = release_0_1_0_file(tmp_path / "siesta.db")
    assert user_version(path) == 0

    stores = open_sqlite(path)
    try:
        release_0_1_0.assert_all_there(stores)
    finally:
        stores.close()
    assert user_version(path) == len(MIGRATIONS)
    open_sqlite(tmp_path / "new.db").close()
    assert schema(path) == schema(tmp_path / "new.db")  # upgraded ends like new


def test_a_store_from_a_newer_release_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "siesta.db"
    open_sqlite(path).close()
    newer = len(MIGRATIONS) + 1
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {newer}")
    conn.close()

    with pytest.raises(StoreSchemaTooNew) as refused:
        open_sqlite(path)
    message = refused.value.message
    assert f"schema version {newer}" in message
    assert f"up to {len(MIGRATIONS)}" in message
    assert refused.value.fields == {"storeVersion": newer, "codeVersion": len(MIGRATIONS)}
    assert user_version(path) == newer


def test_migrations_run_once_in_order_and_a_failing_one_changes_nothing(tmp_path: Path) -> None:
    ran: list[str] = []

    def add_notes(conn: sqlite3.Connection) -> None:
        """The next one: a table of notes (a test's)."""
        ran.append("notes")
        conn.execute("CREATE TABLE notes (text TEXT NOT NULL)")

    def broken(conn: sqlite3.Connection) -> None:
        """The one after: creates a table, then fails."""
        conn.execute("CREATE TABLE half (x)")
        msg = "broken"
        raise RuntimeError(msg)

    conn = sqlite3.connect(tmp_path / "siesta.db", isolation_level=None)
    with_notes = len(MIGRATIONS) + 1
    assert migrate(conn, [*MIGRATIONS, add_notes]) == with_notes
    assert migrate(conn, [*MIGRATIONS, add_notes]) == with_notes
    assert ran == ["notes"]
    with pytest.raises(RuntimeError):
        migrate(conn, [*MIGRATIONS, add_notes, broken])
    assert conn.execute("PRAGMA user_version").fetchone() == (with_notes,)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "notes" in tables
    assert "half" not in tables
    conn.close()


def test_two_processes_opening_a_new_file_together_migrate_it_once(tmp_path: Path) -> None:
    ran: list[int] = []

    def slow(conn: sqlite3.Connection) -> None:
        """The next one: takes a while (a test's), so the other opener arrives meanwhile."""
        ran.append(1)
        time.sleep(0.3)

    def opener() -> None:
        conn = sqlite3.connect(tmp_path / "siesta.db", isolation_level=None, timeout=5)
        migrate(conn, [*MIGRATIONS, slow])
        conn.close()

    threads = [threading.Thread(target=opener) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ran == [1]
    assert user_version(tmp_path / "siesta.db") == len(MIGRATIONS) + 1
