"""Snapshots of sandboxes and conversations started from them (forks)."""

from runtime.sandbox.snapshots.errors import (
    ConversationExists,
    NoSandboxToSnapshot,
    SnapshotLimitReached,
    SnapshotNotFound,
)
from runtime.sandbox.snapshots.leftovers import SnapshotLeftovers
from runtime.sandbox.snapshots.service import Fork, Snapshots
from runtime.sandbox.snapshots.settings import SnapshotSettings

__all__ = [
    "ConversationExists",
    "Fork",
    "NoSandboxToSnapshot",
    "SnapshotLeftovers",
    "SnapshotLimitReached",
    "SnapshotNotFound",
    "SnapshotSettings",
    "Snapshots",
]
