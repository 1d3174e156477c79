"""The operators' answers (the ``admin`` scope)."""

from __future__ import annotations

from pydantic import BaseModel


class ActionPublic(BaseModel):
    count: int
    ids: list[str]


class ReconcileReportPublic(BaseModel):
    deployment: str
    dryRun: bool
    found: dict[str, int]
    actions: dict[str, ActionPublic]
    skippedBusy: list[str]
    """Conversations (or the whole pass) left alone because someone held them."""
    errors: list[str]
