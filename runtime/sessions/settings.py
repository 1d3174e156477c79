"""Settings of sessions: leases, capacity, idle tiers, reconciliation, the warm pool."""

from __future__ import annotations

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
    """The warm pool: ready sandboxes per enabled catalog image."""

    model_config = ConfigDict(extra="forbid")

    size: int = Field(2, ge=0)
    """Ready sandboxes kept per enabled image (paused, agent started); 0 disables the pool."""
    max_total: int = Field(8, ge=0)
    """Ready sandboxes in all, whatever the number of images."""
    refill_interval_seconds: float = Field(2.0, gt=0)
    """Time between refills (run by every service instance; the store keeps counts exact)."""
    refill_per_pass: int = Field(1, ge=1)
    """Members made per image per refill: the refill rate."""
