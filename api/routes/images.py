"""Base-image catalog: what the agent-configuration form offers, and validation.

Any valid token, whatever its scopes: the enabled images are the same for every
org, read-only and no secret, and both the backend's agent form and an approver's
view show them. An image's ``id`` is what an agent selects: the catalog id for its
default version, ``id:tag`` for another. Changing the catalog is the operators'
(``/v1/admin/images``, the console; the catalog file seeds it).
"""

from __future__ import annotations

from fastapi import APIRouter

from siesta_contract.images import ImagePublic, ImageSelection, ImageSelectionValid, ImagesPublic

from api.deps import Authenticated, ServicesDep
from api.responses import COMMON, error_responses

router = APIRouter(
    prefix="/v1/images",
    tags=["images"],
    dependencies=Authenticated,
    responses=error_responses(*COMMON),
)


@router.get("")
def list_images(services: ServicesDep) -> ImagesPublic:
    """The enabled images, in catalog order (none when Sandbox is disabled)."""
    if not services.settings.sandbox.enabled:
        return ImagesPublic(
            sandboxEnabled=False,
            reason="Sandbox is not enabled in this deployment (SIESTA_SANDBOX__ENABLED)",
            images=[],
        )
    catalog = services.catalog
    images = [
        ImagePublic(id=catalog.selection_of(i), title=i.title, description=i.description)
        for i in catalog.enabled()
    ]
    reason = None if images else "the image catalog has no enabled image"
    return ImagesPublic(sandboxEnabled=True, reason=reason, images=images)


@router.post("/validate")
def validate_selection(body: ImageSelection, services: ServicesDep) -> ImageSelectionValid:
    """Check an agent configuration's base image; failures are ``image_*`` errors."""
    catalog = services.catalog
    image = catalog.select(body.baseImage)
    public = ImagePublic(
        id=catalog.selection_of(image), title=image.title, description=image.description
    )
    return ImageSelectionValid(valid=True, image=public)
