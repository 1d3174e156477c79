"""Snapshots of a conversation's sandbox, and conversations started from them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from siesta_contract.errors import ErrorBody
from siesta_contract.text import ID_MAX_CHARS, ID_PATTERN

ConversationId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)]


class SnapshotCreate(BaseModel):
    name: str | None = Field(None, max_length=128)
    """A name to tell it by (not unique)."""
    metadata: dict[str, str] = Field(default_factory=dict, max_length=64)
    keepMemory: bool = False
    """Keep the running processes and memory too. No provider here can yet: 422
    ``snapshot_memory_not_supported``, with the reason."""


class SnapshotPublic(BaseModel):
    snapshotId: str
    conversationId: str
    """The conversation whose sandbox it was taken of."""
    imageId: str
    """The catalog image that sandbox ran; a sandbox started from the snapshot keeps it."""
    name: str | None
    metadata: dict[str, str]
    createdBy: str
    createdAt: float
    workspaceBytes: int
    """The workspace copy's size (a disk image: the workspace's size)."""
    workspaceAllocatedBytes: int
    """What the copy occupies on the host (sparse, shared where copied on write)."""
    imageBytes: int
    """What the snapshot's image adds to its base image: files installed or changed
    outside the workspace."""
    copyOnWrite: bool = False
    """Whether its copies are clones sharing blocks with the sandbox they were taken of
    (the host's disk folder clones by reference: XFS with reflink): a snapshot then
    costs milliseconds and disk only as either side changes. False: byte copies."""


class SnapshotsPublic(BaseModel):
    snapshots: list[SnapshotPublic]
    """Oldest first."""


class ConversationFromSnapshot(BaseModel):
    conversationId: ConversationId
    """The new conversation: it must have no sandbox yet."""


class ForkCreate(ConversationFromSnapshot):
    keepMemory: bool = False
    """Start the fork with the source's running processes and memory. No provider here
    can yet: 422 ``snapshot_memory_not_supported``, with the reason."""


class ConversationStarted(BaseModel):
    conversationId: str
    sessionId: str
    imageId: str
    createdAt: float


class ForkPublic(ConversationStarted):
    sourceConversationId: str
    snapshotSeconds: float
    """How long keeping the source's files took (its sandbox was frozen for this)."""
    startSeconds: float
    """How long starting the fork's sandbox took."""


class ForksCreate(BaseModel):
    conversationIds: list[ConversationId] = Field(
        min_length=1, max_length=100, json_schema_extra={"uniqueItems": True}
    )
    """The new conversations, one fork each, all from one snapshot of the source (one
    freeze); none may have a sandbox yet. At most ``SIESTA_SNAPSHOTS__MAX_FORKS_PER_CALL``
    (20 unless the deployment says otherwise)."""
    keepMemory: bool = False
    """As a single fork's ``keepMemory``."""


class ForkOutcome(BaseModel):
    conversationId: str
    started: ConversationStarted | None = None
    """Its new sandbox's session, when it started."""
    error: ErrorBody | None = None
    """Why it did not (each fork starts or fails on its own)."""


class ForksPublic(BaseModel):
    sourceConversationId: str
    snapshotSeconds: float
    """How long keeping the source's files took (its sandbox was frozen for this, once)."""
    startSeconds: float
    """How long starting every fork's sandbox took."""
    forks: list[ForkOutcome]
    """In the order asked for."""
