"""The error body every failure has: ``{"error": {"code", "message", ...fields}}``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ErrorBody(BaseModel):
    """``code`` is stable (clients branch on it); limit errors carry ``limit`` and
    ``unit``; other fields depend on the code."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorBody
