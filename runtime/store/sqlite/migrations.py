"""The SQLite store's schema: an ordered list of forward migrations.

``PRAGMA user_version`` in the file's header records how many have run; a file
from before versions existed reads 0. Every table is created here, not beside the
code that uses it, because a released migration must never change: a new table or
column is a new function appended to ``MIGRATIONS``, with a docstring saying what
it changes. ``migrate`` runs the missing ones in one ``BEGIN IMMEDIATE``
transaction (SQLite's DDL and the version are transactional): a second process
opening the file meanwhile (another instance on a shared volume, the egress proxy)
waits for the write lock, then finds nothing left to do; a failure leaves the file
as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from runtime.store.migrations import refuse_newer

Migration = Callable[[sqlite3.Connection], None]

RELEASE_0_1_0 = """
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
CREATE TABLE IF NOT EXISTS network_rules (
    org TEXT NOT NULL, conversation TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (org, conversation)
);
CREATE TABLE IF NOT EXISTS egress_refusals (
    org TEXT NOT NULL, conversation TEXT NOT NULL, count INTEGER NOT NULL,
    last_host TEXT NOT NULL, last_reason TEXT NOT NULL, last_at REAL NOT NULL,
    expires_at REAL NOT NULL, PRIMARY KEY (org, conversation)
);
CREATE TABLE IF NOT EXISTS agents (
    org TEXT NOT NULL, agent_id TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (org, agent_id)
);
CREATE TABLE IF NOT EXISTS console_sessions (
    id_digest TEXT PRIMARY KEY, expires_at REAL NOT NULL, body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS catalog_images (ref TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS catalog_defaults (image_id TEXT PRIMARY KEY, tag TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS image_builds (
    build_id TEXT PRIMARY KEY, ref TEXT NOT NULL, started_at REAL NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS image_builds_by_ref ON image_builds (ref, started_at);
CREATE TABLE IF NOT EXISTS image_build_log (
    build_id TEXT NOT NULL, line_no INTEGER NOT NULL, line TEXT NOT NULL,
    PRIMARY KEY (build_id, line_no)
);
CREATE TABLE IF NOT EXISTS audit (
    entry_id TEXT PRIMARY KEY, at REAL NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
    target TEXT NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit (at);
"""
"""Every table and index of release 0.1.0, frozen: not to be edited (see above)."""


def release_0_1_0(conn: sqlite3.Connection) -> None:
    """1: the schema of release 0.1.0, which recorded no version.

    Creates what is missing, so a new file and a 0.1.0 file (version 0 both) end
    alike; files from before 0.1.0 also get the columns that were added in its
    development (they were checked at every start until versions existed).
    """
    for statement in _statements(RELEASE_0_1_0):
        conn.execute(statement)
    _add_missing(
        conn,
        "sessions",
        [("user", "TEXT NOT NULL DEFAULT ''"), ("fence", "INTEGER NOT NULL DEFAULT 0")],
    )
    _add_missing(conn, "files", [("message_id", "TEXT")])
    _add_missing(
        conn,
        "idempotency",
        [
            ("held_until", "REAL"),
            ("attempt", "INTEGER NOT NULL DEFAULT 1"),
            ("dispatched", "TEXT"),
            ("conversation", "TEXT"),
        ],
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idempotency_by_conversation ON idempotency (conversation)"
    )


def egress_secrets(conn: sqlite3.Connection) -> None:
    """2: orgs' secrets for the egress proxy to substitute, sealed (release 0.2.0)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS egress_secrets (org TEXT NOT NULL, name TEXT NOT NULL, "
        "sealed TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, "
        "size INTEGER NOT NULL, hosts TEXT NOT NULL, header TEXT NOT NULL, "
        "PRIMARY KEY (org, name))"
    )


def knowledge_bases(conn: sqlite3.Connection) -> None:
    """3: knowledge bases, their content versions and chunks (release 0.2.0)."""
    for statement in _statements(KNOWLEDGE):
        conn.execute(statement)


KNOWLEDGE = """
CREATE TABLE IF NOT EXISTS knowledge_bases (
    org TEXT NOT NULL, base_id TEXT NOT NULL, created_at REAL NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, PRIMARY KEY (org, base_id)
);
CREATE TABLE IF NOT EXISTS knowledge_versions (
    org TEXT NOT NULL, version_id TEXT NOT NULL, base_id TEXT NOT NULL,
    created_at REAL NOT NULL, status TEXT NOT NULL, claimed_at REAL NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (org, version_id)
);
CREATE INDEX IF NOT EXISTS knowledge_versions_by_base ON knowledge_versions (org, base_id);
CREATE INDEX IF NOT EXISTS knowledge_versions_by_status ON knowledge_versions (status, created_at);
CREATE TABLE IF NOT EXISTS knowledge_chunks (
    org TEXT NOT NULL, base_id TEXT NOT NULL, version_id TEXT NOT NULL, seq INTEGER NOT NULL,
    heading TEXT NOT NULL, text TEXT NOT NULL, start INTEGER NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (org, version_id, seq)
);
CREATE INDEX IF NOT EXISTS knowledge_chunks_by_base ON knowledge_chunks (org, base_id);
"""


MIGRATIONS: tuple[Migration, ...] = (release_0_1_0, egress_secrets, knowledge_bases)
"""In order; ``user_version`` N means the first N have run."""


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Run the migrations ``conn``'s file lacks; the schema version it is at after.

    Raises ``StoreSchemaTooNew`` for a file a newer release has migrated.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        (found,) = conn.execute("PRAGMA user_version").fetchone()
        file = conn.execute("PRAGMA database_list").fetchone()[2]
        refuse_newer(found, len(migrations), f"the SQLite store {file}")
        for migration in migrations[found:]:
            migration(conn)
        conn.execute(f"PRAGMA user_version = {len(migrations)}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(migrations)


def _statements(script: str) -> list[str]:
    # executescript would COMMIT the open transaction first; these scripts have no ";"
    # inside a statement (no trigger, no such literal), so splitting at it is exact.
    return [text.strip() for text in script.split(";") if text.strip()]


def _add_missing(conn: sqlite3.Connection, table: str, columns: list[tuple[str, str]]) -> None:
    present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    for name, ddl in columns:
        if name not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}")
