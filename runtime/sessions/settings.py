"""Settings of sessions: leases, capacity, idle tiers, reconciliation, the warm pool."""

from __future__ import annotations

import os
import socket

from pydantic import BaseModel, ConfigDict, Field


class LeaseSettings(BaseModel):
    """The per-conversation lease that serialises sandbox operations."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: float = Field(15.0, gt=0)
    """A holder that stops renewing loses the lease after this long."""
    wait_seconds: float = Field(30.0, ge=0)
    """How long a call waits for a busy conversation before ``session_busy``."""


class CapacitySettings(BaseModel):
    """Limits on active (running) sandboxes."""

    model_config = ConfigDict(extra="forbid")

    max_active_per_org: int = Field(50, ge=1)
    max_active_per_user: int = Field(10, ge=1)
    max_active_per_host: int = Field(100, ge=1)
    host_id: str = Field(default_factory=socket.gethostname)
    """Which host's budget this instance's sandboxes count against (its Docker engine)."""


class LifecycleSettings(BaseModel):
    """Idle tiers. Idle time counts from the end of a session's last operation."""

    model_config = ConfigDict(extra="forbid")

    pause_after_seconds: float = Field(300.0, gt=0)
    """Idle this long: processes frozen, memory kept (resumes in milliseconds)."""
    stop_after_seconds: float = Field(1800.0, gt=0)
    """Idle this long: processes ended, memory freed, disk and packages kept."""
    retire_after_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    """Idle this long: container and workspace removed; the next operation starts afresh."""
    resume_timeout_seconds: float = Field(30.0, gt=0)
    """A resume that takes longer fails with ``resume_timeout``."""


class ReconcileSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    orphan_grace_seconds: float = Field(300.0, ge=0)
    """Labelled containers/volumes without a session are removed only when older than this."""
    background: bool | None = None
    """Run passes inside the service; default: on with SQLite, off with Redis (use the CronJob)."""
    interval_seconds: float = Field(60.0, gt=0)
    """Time between background passes."""


class PoolSettings(BaseModel):
    """The warm pool: ready sandboxes per enabled catalog image, as many as demand asks.

    Each image's target is the busiest ``surge_seconds`` of first operations in the
    last ``demand_window_seconds``, times ``headroom``, between ``min_per_image`` and
    ``max_per_image``; all images together stay within ``max_total``.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """False: no pool; every new conversation makes its sandbox on its first call."""
    min_per_image: int = Field(4, ge=0)
    """Ready sandboxes kept per enabled image however quiet it is (the floor): the
    first arrivals of a quiet spell are served while refills catch up."""
    max_per_image: int = Field(64, ge=0)
    """The ceiling per image, however busy."""
    max_total: int = Field(64, ge=0)
    """Ready sandboxes in all, whatever the number of images. A paused member costs
    about 3 MB of host memory: 64 are about 200 MB."""
    demand_window_seconds: float = Field(300.0, gt=0)
    """How far back arrivals (first operations of new conversations) are remembered."""
    surge_seconds: float = Field(10.0, gt=0)
    """The span whose busiest count of arrivals the pool must absorb without a miss:
    about the time it takes to make that many members again."""
    headroom: float = Field(1.5, ge=1)
    """The target is the busiest surge times this."""
    refill_interval_seconds: float = Field(0.5, gt=0)
    """Time between refill steps (every service instance runs them; the store's slots
    keep the counts exact)."""
    refill_quiet_seconds: float = Field(0.5, ge=0)
    """Refills above the low-water mark wait until no first operation has been made
    for this long, so that they never take the engine from a conversation waiting for
    its sandbox (below the mark they always run)."""

    @property
    def active(self) -> bool:
        return self.enabled and self.max_total > 0 and self.max_per_image > 0


class ProvisionSettings(BaseModel):
    """Making sandboxes: how many at once, and how many may wait for a turn."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int = Field(default_factory=lambda: (os.cpu_count() or 1) + 1, ge=1)
    """Sandboxes made at the same time by this instance (first operations and pool
    refills together); default: the host's cores + 1 (the engine is CPU bound)."""
    queue_limit: int = Field(256, ge=0)
    """First operations that may wait for a turn; one more is refused with
    ``capacity_unavailable`` naming this limit. Turns are first come, first served."""
