"""Shared state: the ``Store`` interface.

A session record is the truth about which sandbox serves a conversation. It is
keyed by (org, conversation), so one org can never name another org's session.
Every change to a session record carries the *fence* of the lease its writer
holds; a store refuses a change whose fence is lower than the one it already
has, so a holder that stalled past its lease can never overwrite a newer
holder's state.

Implementations: ``sqlite.py`` (embedded default, one instance) and
``redis.py`` (several instances). Both pass ``tests/runtime/store/test_contract.py``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class SessionStatus(enum.StrEnum):
    ACTIVE = "active"
    """The sandbox is meant to be running and counts against capacity."""
    PAUSED = "paused"
    """Idle: processes frozen, memory kept; still counts against capacity."""
    STOPPED = "stopped"
    """Suspended on purpose (processes gone, disk kept); resumed by the next operation."""
    RETIRED = "retired"
    """Idle past the maximum age or failed: sandbox removed; the next operation starts afresh."""
    LOST = "lost"
    """The sandbox vanished underneath us; the next operation starts afresh."""

    @property
    def has_sandbox(self) -> bool:
        return self in (SessionStatus.ACTIVE, SessionStatus.PAUSED, SessionStatus.STOPPED)


@dataclass(frozen=True)
class SessionRecord:
    org: str
    conversation: str
    session_id: str
    sandbox_id: str
    image_id: str
    """Catalog id the session was created with; pinned for its whole life."""
    image_ref: str
    """The Docker reference that id resolved to at provisioning."""
    status: SessionStatus
    created_at: float
    last_used_at: float
    generation: int
    """1 for the first sandbox of the conversation, +1 for each replacement."""
    user: str = ""
    """The user whose capacity budget the session counts against."""
    fence: int = 0
    """Fence of the lease holder that wrote this version."""

    @property
    def key(self) -> str:
        return conversation_key(self.org, self.conversation)


def conversation_key(org: str, conversation: str) -> str:
    """One string per conversation; ``/`` cannot occur in ids, so it is unambiguous."""
    return f"{org}/{conversation}"


class FileKind(enum.StrEnum):
    ATTACHMENT = "attachment"
    """Uploaded by the agent backend (the user's files)."""
    ARTIFACT = "artifact"
    """Published from the sandbox, or created by a helper, as a downloadable result."""
    WORKING = "working"
    """Made by a helper for later steps (e.g. ``writeExcelFile``); not a message artifact."""


@dataclass(frozen=True)
class FileRecord:
    """A conversation file; its bytes live in the blob store under ``file_id``."""

    org: str
    conversation: str
    file_id: str
    name: str
    size: int
    content_type: str
    sha256: str
    kind: FileKind
    created_at: float
    editable: bool = False
    """Created for editing (``copyFileAsArtifact``): its content may be replaced."""


class Store(Protocol):
    # -- sessions (fenced) ----------------------------------------------------------

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        """The conversation's session, or ``None`` if it has none."""

    def put_session(self, record: SessionRecord) -> bool:
        """Insert or replace the conversation's session; False if ``record.fence``
        is lower than the stored record's (a newer holder wrote it)."""

    def touch_session(
        self, org: str, conversation: str, session_id: str, at: float, fence: int
    ) -> bool:
        """Set ``last_used_at`` if the conversation still has that session and the
        fence is not stale."""

    def delete_session(self, org: str, conversation: str, fence: int) -> SessionRecord | None:
        """Remove and return the conversation's session, unless the fence is stale."""

    def list_sessions(self) -> list[SessionRecord]:
        """Every session record (for reconciliation and tests)."""

    # -- leases ----------------------------------------------------------------------

    def acquire_lease(self, key: str, owner: str, ttl: float) -> int | None:
        """Take the lease on ``key`` for ``ttl`` seconds if it is free (or expired).

        Returns a fence from one counter that only grows, or ``None`` if held.
        """

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        """Extend the lease if ``owner`` still holds it (compare-and-extend)."""

    def release_lease(self, key: str, owner: str) -> bool:
        """Drop the lease if ``owner`` holds it (compare-and-delete) and wake a waiter."""

    def wait_for_release(self, key: str, timeout: float) -> None:
        """Block until the lease on ``key`` may be free, at most ``timeout`` seconds."""

    def lease_owner(self, key: str) -> str | None:
        """Who holds the lease on ``key`` right now."""

    # -- capacity slots ----------------------------------------------------------------

    def claim_slot(self, member: str, scopes: list[tuple[str, int]]) -> int | None:
        """Count ``member`` in every scope at once, if each has room under its limit.

        A member already counted in a scope uses no new room there. Returns
        ``None`` on success, else the index of the first scope that is full
        (and counts the member nowhere).
        """

    def release_slot(self, member: str, scopes: list[str]) -> None:
        """Stop counting ``member`` in these scopes."""

    def slot_members(self, scope: str) -> list[str]:
        """Who is counted in ``scope``."""

    # -- files ---------------------------------------------------------------------

    def add_file(self, record: FileRecord) -> None:
        """Record a new conversation file (ids are never reused)."""

    def list_files(self, org: str, conversation: str) -> list[FileRecord]:
        """The conversation's files, oldest first."""

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        """One file of the conversation; another conversation's id finds nothing."""

    def replace_file(self, record: FileRecord) -> bool:
        """Update an existing file's size, type and hash (its bytes were replaced)."""

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        """Forget the conversation's files and return them (to delete their blobs)."""

    # -- deletions that had to wait, and housekeeping ---------------------------------

    def mark_deleted(self, key: str) -> None:
        """Remember that the conversation was deleted while busy (torn down later)."""

    def deleted_keys(self) -> list[str]:
        """Conversations deleted while busy, not yet torn down."""

    def clear_deleted(self, key: str) -> None:
        """The conversation's teardown is done."""

    def clear_expired_leases(self) -> int:
        """Drop leases whose holders died (no-op where the store expires them itself)."""

    def ping(self) -> None:
        """Raise ``StateUnavailable`` when the store cannot be reached."""

    def close(self) -> None:
        """Release connections."""
