"""A conversation's sandbox measured live, paused and resumed on request
(``/v1/conversations/{id}/sandbox/metrics``, ``.../pause``, ``.../resume``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SandboxStateName = Literal["running", "paused", "stopped", "missing"]


class SandboxMetricsPublic(BaseModel):
    """Read from outside the sandbox (its cgroup and file systems): measuring runs
    nothing in it and never resumes it. ``null``: not known in its state (a stopped
    sandbox has no processes; a file system not mounted has no figures)."""

    state: SandboxStateName
    """What the provider reports now; a paused sandbox stays paused."""
    sampledAt: float
    """Unix time of the sample."""
    cpuCount: float
    """The cores it may use (its CPU limit)."""
    cpuUsedPct: float | None
    """Share of ``cpuCount`` used lately, 0 to 100 (0 while paused)."""
    memUsedBytes: int | None
    """Memory in use, without the page cache the kernel can take back."""
    memCacheBytes: int | None
    memLimitBytes: int | None
    pids: int | None
    """Processes (and threads) running in it."""
    diskUsedBytes: int | None
    """``/mnt/work``'s file system."""
    diskTotalBytes: int | None
    diskFreeBytes: int | None
    rootDiskUsedBytes: int | None
    """The sandbox's own file system outside ``/mnt/work`` (installed packages, /tmp),
    where it has a size limit of its own."""
    rootDiskTotalBytes: int | None
    rootDiskFreeBytes: int | None
    egressRefusals: int | None = None
    """Connections its egress proxy refused (``null``: not counted here)."""


class SandboxPauseArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keepMemory: bool = True
    """``true``: processes frozen, memory kept (the ``paused`` tier); ``false``:
    processes ended, memory freed, disk and installed packages kept (``stopped``)."""


class SandboxTierPublic(BaseModel):
    state: Literal["running", "paused", "stopped"]
    """Where the sandbox is now."""
    changed: bool
    """Whether this call moved it (``false``: it was there already)."""
    resumed: Literal["paused", "stopped"] | None = None
    """A resume: what it was brought back from (``null``: it was running)."""
