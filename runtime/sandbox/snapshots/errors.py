"""Refusals of the snapshot and fork calls."""

from __future__ import annotations

from runtime.core.errors import NotFound, SiestaError


class SnapshotNotFound(NotFound):
    code = "snapshot_not_found"


class NoSandboxToSnapshot(NotFound):
    """The source conversation has no sandbox: there is nothing to keep."""

    code = "no_sandbox"


class SnapshotLimitReached(SiestaError):
    code = "snapshot_limit_reached"


class ConversationExists(SiestaError):
    """A fork or a start from a snapshot names a conversation that has a sandbox."""

    code = "conversation_exists"
