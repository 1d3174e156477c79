"""What one operation is handed: the conversation's session, its sandbox running."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from runtime.core.records import SessionRecord


class ResetReason(enum.StrEnum):
    """Why an operation started the conversation afresh (``workspace_reset``)."""

    WORKSPACE_MISSING = "workspace_missing"
    """The sandbox's workspace no longer exists (removed outside the service)."""
    RETIRED = "retired"
    """The session was retired (idle past ``SIESTA_LIFECYCLE__RETIRE_AFTER_SECONDS``)."""
    LOST = "lost"
    """Reconciliation found the sandbox and its workspace gone."""


@dataclass(frozen=True)
class ActiveSession:
    """A session whose sandbox is running, handed to one operation."""

    record: SessionRecord
    workspace_reset: bool
    """True when this operation had to start afresh: the workspace was gone."""
    provisioned: bool
    """True when this operation created the sandbox (first use or replacement)."""
    resumed: str | None = None
    """``"paused"`` or ``"stopped"`` when this operation brought a suspended or stopped
    sandbox back (``"stopped"``: its processes had ended)."""
    sandbox_recreated: bool = False
    """True when the sandbox could not be started and was made again around its
    workspace: files kept, anything installed outside ``/mnt/work`` gone."""
    reset_reason: ResetReason | None = None
