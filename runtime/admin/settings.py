"""Settings of the operators' side: the audit trail's retention."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AuditSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    retention_days: float = Field(365.0, gt=0)
    """How long an operator's action stays in the audit trail (``SIESTA_AUDIT__RETENTION_DAYS``)."""
    prune_interval_seconds: float = Field(3600.0, gt=0)
    """How often an instance forgets expired entries (at most; on its next record)."""
