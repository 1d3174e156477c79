"""The base-image catalog as the agent-configuration form reads it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ImagePublic(BaseModel):
    id: str
    title: str
    description: str


class ImagesPublic(BaseModel):
    sandboxEnabled: bool
    """False when this deployment does not offer Sandbox: ``images`` is then empty."""
    reason: str | None = None
    """Why there is nothing to choose (Sandbox disabled, or no enabled image)."""
    images: list[ImagePublic]


def _required_base_image(schema: dict[str, Any]) -> None:
    schema["required"] = ["baseImage"]
    schema["properties"]["baseImage"].pop("default", None)


class ImageSelection(BaseModel):
    # Required and non-empty, as the document says; checked by the catalog, which
    # answers image_required (and lists the enabled images) when it is not there.
    model_config = ConfigDict(extra="forbid", json_schema_extra=_required_base_image)

    baseImage: str = Field("", json_schema_extra={"minLength": 1})


class ImageSelectionValid(BaseModel):
    valid: bool
    image: ImagePublic
