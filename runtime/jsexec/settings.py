"""Settings of the JavaScript executor."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class JsSettings(BaseModel):
    """The JavaScript executor's pool and limits."""

    model_config = ConfigDict(extra="forbid")

    pool_size: int = Field(2, ge=1)
    """Pre-started worker processes waiting for a script."""
    worker_start: Literal["fork", "exec"] = "fork"
    """``fork``: workers are forks of a template process that has V8 loaded (a few ms
    each); ``exec``: each worker starts its own interpreter (slower; no template)."""
    jail: Literal["full", "unprivileged", "off"] = "full"
    """How workers are contained (``runtime/jsexec/jail.py``): ``full`` (namespaces,
    empty root, own uid, seccomp, rlimits: needs a root service), ``unprivileged``
    (seccomp, rlimits, empty environment: for a non-root service in a container),
    ``off`` (plain forks: a benchmark's baseline). A jail that cannot be built
    makes the executor unavailable, never unjailed."""
    jail_uid: int = Field(64200, ge=1, le=2**31 - 1)
    """The uid and gid a ``full``-jailed worker runs as: one nothing else uses."""
    timeout_seconds: float = Field(30.0, gt=0)
    """Wall-clock limit of one script, helper calls included."""
    memory_limit_mb: int = Field(512, ge=64)
    """Resident memory one worker may reach before it is killed."""
    max_result_bytes: int = Field(256 * 1024, ge=16)
    """The result string is cut at this many bytes (and says so)."""
    max_log_entries: int = Field(1000, ge=1)
    """``log`` calls kept; later ones are counted, not kept."""
    max_log_entry_bytes: int = Field(8 * 1024, ge=16)
    """One log or status message is cut at this many bytes."""
    max_log_total_bytes: int = Field(256 * 1024, ge=16)
    """All log messages of one script together."""
    max_status_entries: int = Field(200, ge=1)
    """``logStatus`` calls kept (and streamed); later ones are counted, not kept."""
    max_status_total_bytes: int = Field(64 * 1024, ge=16)
    """All status messages of one script together."""
    max_code_bytes: int = Field(256 * 1024, ge=16)
    """Longest script accepted."""
    acquire_timeout_seconds: float = Field(30.0, gt=0)
    """How long a script waits for a free worker (longer only while one is being
    started, up to that start's own limit)."""
    worker_start_timeout_seconds: float = Field(30.0, gt=0)
    """How long a forked worker may take to be ready for a script."""
    template_answer_seconds: float = Field(10.0, gt=0)
    """How long the template process may take to fork a worker (it forks in
    milliseconds): one that has not answered by then is stuck, and is replaced."""
    max_worker_message_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    """Largest message the service reads from a worker (a helper call's arguments, a
    result): a bigger one stops that worker."""
    max_helper_calls: int = Field(10_000, ge=1)
    """Helper calls one script may make; past it each call throws (``js_helper_call_limit``)."""
    max_excel_rows: int = Field(200_000, ge=1)
    """Most rows a spreadsheet helper reads or writes in one call."""

    @model_validator(mode="after")
    def _jail_needs_the_template(self) -> JsSettings:
        if self.jail != "off" and self.worker_start != "fork":
            msg = "a jailed JavaScript executor needs worker_start=fork (set jail=off to exec)"
            raise ValueError(msg)
        return self
