"""Settings of snapshots and forks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SnapshotSettings(BaseModel):
    """Snapshots of sandboxes (``SIESTA_SNAPSHOTS__*``)."""

    model_config = ConfigDict(extra="forbid")

    max_per_org: int = Field(20, ge=0)
    """Snapshots an org may keep (each holds a copy of a workspace and an image layer
    on the engine's disk); 0: none. A fork keeps none: its snapshot is its own disk."""
    max_forks_per_call: int = Field(20, ge=1, le=100)
    """Conversations one fork call may make (``/v1`` ``forks``, E2B's ``count``): all
    from one snapshot, one freeze of the source. The call answers once every fork has
    started or failed, so its time grows with this: some 0.2 s a fork on an idle
    2-core host, 1 s on a loaded one (forks start ``provision.concurrency`` at a time).
    The served OpenAPI document states it (``maxItems``)."""
    leftover_grace_seconds: float = Field(600.0, ge=0)
    """How old a snapshot image or copy without a record must be before clean-up
    removes it (younger ones may be a snapshot being taken right now)."""
