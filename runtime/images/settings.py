"""Settings of the operators' image catalog."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runtime.core.settings import REPO_ROOT


class ImageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    catalog_path: Path = REPO_ROOT / "images" / "catalog.yaml"
    """The operators' catalog of base images."""
