"""Base-image catalog: what the agent-configuration form offers, and validation."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from api.deps import Authenticated, ServicesDep

router = APIRouter(prefix="/v1/images", tags=["images"], dependencies=Authenticated)


class ImagePublic(BaseModel):
    id: str
    title: str
    description: str


class ImagesPublic(BaseModel):
    images: list[ImagePublic]


class ImageSelection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    baseImage: str | None = None


class ImageSelectionValid(BaseModel):
    valid: bool
    image: ImagePublic


@router.get("")
def list_images(services: ServicesDep) -> ImagesPublic:
    """The enabled images, in catalog order."""
    return ImagesPublic(
        images=[
            ImagePublic(id=i.id, title=i.title, description=i.description)
            for i in services.catalog.enabled()
        ]
    )


@router.post("/validate")
def validate_selection(body: ImageSelection, services: ServicesDep) -> ImageSelectionValid:
    """Check an agent configuration's base image; failures are ``image_*`` errors."""
    image = services.catalog.select(body.baseImage)
    return ImageSelectionValid(
        valid=True, image=ImagePublic(id=image.id, title=image.title, description=image.description)
    )
