"""Settings of commands run in a sandbox."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class CommandSettings(BaseModel):
    """Limits of ``runCommand``."""

    model_config = ConfigDict(extra="forbid")

    default_timeout_seconds: int = Field(60, ge=1)
    """Wall-clock timeout when the caller gives none."""
    max_timeout_seconds: int = Field(600, ge=1)
    """Upper bound of a caller's ``timeoutSeconds`` (larger values are capped)."""
    max_output_bytes: int = Field(64 * 1024, ge=1024, le=500 * 1024)
    """Bytes kept per stream (stdout, stderr); the rest is dropped from the middle. At
    most 500 KiB: the sandbox agent returns both streams in one frame of at most 1 MiB."""
    max_command_bytes: int = Field(64 * 1024, ge=16)
    """Longest accepted command text, in UTF-8 bytes."""
    kill_grace_seconds: int = Field(2, ge=1)
    """After the timeout's SIGTERM, how long before SIGKILL."""


class ProcessSettings(BaseModel):
    """Processes that outlive their call (``/v1/.../processes``, terminals, E2B's)."""

    model_config = ConfigDict(extra="forbid")

    max_per_sandbox: int = Field(48, ge=1, le=60)
    """Processes running at once in one sandbox (the agent runs at most 64 requests)."""
    max_watchers_per_sandbox: int = Field(8, ge=1, le=16)
    """Folders watched at once in one sandbox (each is one of the agent's 64 requests,
    beside the processes and a few calls)."""
    max_watcher_bytes: int = Field(1024 * 1024, ge=64 * 1024)
    """What one watcher keeps unread (each change counts its name's bytes and 64 more);
    changes past it are dropped and the next read says how many (``dropped``)."""
    upkeep_interval_seconds: float = Field(1.0, gt=0, le=60)
    """How often watchers nobody reads are stopped and busy sandboxes kept awake."""
    reader_buffer_bytes: int = Field(4 * 1024 * 1024, ge=64 * 1024)
    """Output kept for one reader of a process that does not read it; past it that
    reader's stream ends with an error (the process and other readers go on)."""
    ring_bytes: int = Field(1024 * 1024, ge=0, le=64 * 1024 * 1024)
    """A process's recent output its sandbox's agent keeps (protocol 3), whichever
    instance started it: what a reader on another instance, or one reconnecting after
    its instance stopped, can still get. The agent keeps at most 64 MiB in all per
    sandbox (a process that would pass it is refused, saying so)."""


class MetricsSettings(BaseModel):
    """Live metrics of a sandbox (``.../sandbox/metrics``, E2B's ``get_metrics``), and
    who may read the service's own (``GET /metrics``)."""

    model_config = ConfigDict(extra="forbid")

    token: SecretStr | None = Field(None, min_length=16)
    """A bearer token ``GET /metrics`` requires (``Authorization: Bearer ...``, as a
    Prometheus scrape's ``authorization`` sends it). Unset: ``/metrics`` needs none, as
    before (it shows org ids and counts, never a conversation, a host or any other
    string a sandbox chose); set it wherever the port is reachable beyond the scraper."""

    cpu_window_seconds: float = Field(0.2, gt=0, le=5)
    """CPU use is the CPU time used between two samples over the time between them:
    without an earlier sample of the sandbox recent enough, a second one is taken this
    long after the first (the call waits that long)."""
    cpu_sample_max_age_seconds: float = Field(30.0, gt=0)
    """An earlier sample older than this is not used (the answer would be an average
    over too long a time)."""
    max_tracked_sandboxes: int = Field(4096, ge=1)
    """Earlier samples kept (one per sandbox, the oldest forgotten first)."""
    batch_concurrency: int = Field(8, ge=1, le=64)
    """Sandboxes sampled at once by a call that measures several (E2B's
    ``/sandboxes/metrics``): each sample may wait for the engine (about a second when
    the cgroups cannot be read from here)."""
    fleet_refresh_seconds: float = Field(15.0, gt=0, le=3600)
    """How often each instance counts the deployment's sandboxes and warm-pool members
    in the store (``siesta_sessions``, ``siesta_pool_members``, the console's fleet
    chart): a scrape answers the last count instead of reading the whole store."""
    history_samples: int = Field(240, ge=2, le=10_000)
    """Counts the console's overview keeps for its fleet chart, one per refresh (240
    at 15 s: the last hour), in this instance's memory."""
