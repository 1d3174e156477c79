"""A conversation's sandbox as a resource: what inspecting and deleting it answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class SandboxPublic(BaseModel):
    sessionId: str
    imageId: str
    """The catalog image the sandbox was made from."""
    imageTag: str | None = None
    """Its version (``imageId:imageTag``), kept for the session's whole life."""
    imageRef: str
    """The build it was made from: its digest (``sha256:…``) when the catalog knew it,
    else the image reference."""
    status: Literal["active", "paused", "stopped", "retired", "lost"]
    """What the service recorded."""
    state: Literal["running", "paused", "stopped", "missing"]
    """What the provider reports right now."""
    createdAt: float
    lastUsedAt: float
    generation: int


class ConversationDeleted(BaseModel):
    deleted: bool | Literal["pending"]
    """Whether there was anything to delete (a session, files, executions log
    entries); ``pending``: an operation still holds the conversation (its approvals
    are cancelled already); reconciliation finishes."""
    sessionId: str | None
    deletedFiles: int
