"""The embedded default store: one SQLite file, for a single service instance."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from runtime.store.base import Stores
from runtime.store.sqlite.agents import SqliteAgents
from runtime.store.sqlite.audit import SqliteAudit
from runtime.store.sqlite.capacity import SqliteCapacity
from runtime.store.sqlite.catalog import SqliteCatalog
from runtime.store.sqlite.console import SqliteConsoleSessions
from runtime.store.sqlite.db import Database
from runtime.store.sqlite.deployment import SqliteDeployment
from runtime.store.sqlite.e2b import SqliteE2b
from runtime.store.sqlite.executions import SqliteExecutions
from runtime.store.sqlite.files import SqliteFiles
from runtime.store.sqlite.idempotency import SqliteIdempotency
from runtime.store.sqlite.knowledge import SqliteKnowledge
from runtime.store.sqlite.leases import SqliteLeases
from runtime.store.sqlite.memory import SqliteMemory
from runtime.store.sqlite.network import SqliteNetwork
from runtime.store.sqlite.pool import SqlitePool
from runtime.store.sqlite.revocations import SqliteRevocations
from runtime.store.sqlite.sessions import SqliteDeletions, SqliteSessions
from runtime.store.sqlite.snapshots import SqliteSnapshots


def open_sqlite(path: Path, clock: Callable[[], float] = time.time) -> Stores:
    """Every concern over one database file; ``clock`` is the leases' and keys' time."""
    db = Database(path)
    return Stores(
        sessions=SqliteSessions(db),
        leases=SqliteLeases(db, clock),
        capacity=SqliteCapacity(db),
        files=SqliteFiles(db),
        deletions=SqliteDeletions(db),
        executions=SqliteExecutions(db),
        pool=SqlitePool(db),
        idempotency=SqliteIdempotency(db, clock),
        e2b=SqliteE2b(db),
        deployment=SqliteDeployment(db),
        revocations=SqliteRevocations(db),
        network=SqliteNetwork(db),
        snapshots=SqliteSnapshots(db),
        agents=SqliteAgents(db),
        console=SqliteConsoleSessions(db),
        memory=SqliteMemory(db),
        knowledge=SqliteKnowledge(db),
        catalog=SqliteCatalog(db),
        audit=SqliteAudit(db),
        ping=db.ping,
        close=db.close,
    )
