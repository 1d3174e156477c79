"""State of sessions: the ``Store`` interface.

A session record is the truth about which sandbox serves a conversation. It is
keyed by (org, conversation), so one org can never name another org's session.
Implementations: ``sqlite.py`` (embedded default); Redis comes later and must
pass the same contract tests (``tests/runtime/store/test_contract.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class SessionStatus(enum.StrEnum):
    ACTIVE = "active"
    """A sandbox was provisioned for the conversation and is believed to exist."""


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


class FileKind(enum.StrEnum):
    ATTACHMENT = "attachment"
    """Uploaded by the agent backend (the user's files)."""
    ARTIFACT = "artifact"
    """Published from the sandbox by the agent."""


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


class Store(Protocol):
    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        """The conversation's session, or ``None`` if it has none."""

    def put_session(self, record: SessionRecord) -> None:
        """Insert or replace the conversation's session."""

    def touch_session(self, org: str, conversation: str, session_id: str, at: float) -> bool:
        """Set ``last_used_at`` if the conversation still has that session."""

    def delete_session(self, org: str, conversation: str) -> SessionRecord | None:
        """Remove and return the conversation's session, if any."""

    def list_sessions(self) -> list[SessionRecord]:
        """Every session record (for reconciliation and tests)."""

    def add_file(self, record: FileRecord) -> None:
        """Record a new conversation file (ids are never reused)."""

    def list_files(self, org: str, conversation: str) -> list[FileRecord]:
        """The conversation's files, oldest first."""

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        """One file of the conversation; another conversation's id finds nothing."""

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        """Forget the conversation's files and return them (to delete their blobs)."""

    def close(self) -> None:
        """Release connections."""
