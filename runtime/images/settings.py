"""Settings of the operators' image catalog."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.settings import REPO_ROOT


class ImageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    catalog_path: Path = REPO_ROOT / "images" / "catalog.yaml"
    """The operators' catalog of base images."""
    build_timeout_seconds: float = Field(1800.0, gt=0)
    """How long one version's build may hold its lease (another instance may build it
    after that, should the first have died mid-build)."""
    build_log_lines: int = Field(5000, ge=10)
    """Lines of a build's log kept (later lines are dropped; the error is kept)."""
    build_log_bytes: int = Field(1_048_576, ge=1024)
    """Bytes of a build's log kept (later lines are dropped, a note says where; the
    error is kept)."""
