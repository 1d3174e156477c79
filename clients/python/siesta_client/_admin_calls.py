"""The operators' calls (the ``admin`` scope) as data: the live image catalog, its
builds, and the audit trail; shared by the sync and async clients (``client.admin``)."""

from __future__ import annotations

from typing import Any

from siesta_contract.admin import (
    AuditPage,
    CatalogImageDetail,
    CatalogImagePublic,
    CatalogImagesPublic,
    CatalogImportPublic,
    ImageBuildPublic,
    ImageState,
    ImageStateChange,
    NewCatalogImage,
    NewCatalogImageAnswer,
)

from siesta_client._ops import Op, args, model


def catalog_images() -> Op[CatalogImagesPublic]:
    return Op("GET", "/v1/admin/images", model(CatalogImagesPublic))


def catalog_image(ref: str) -> Op[CatalogImageDetail]:
    return Op("GET", f"/v1/admin/images/{ref}", model(CatalogImageDetail))


def add_catalog_image(image: NewCatalogImage | dict[str, Any]) -> Op[NewCatalogImageAnswer]:
    checked = NewCatalogImage.model_validate(image)
    body = checked.model_dump(mode="json", exclude_unset=True)
    read = model(NewCatalogImageAnswer)
    return Op("POST", "/v1/admin/images", read, json=body, body=NewCatalogImage)


def set_image_state(ref: str, state: ImageState) -> Op[CatalogImagePublic]:
    body = args(ImageStateChange, state=state)
    path = f"/v1/admin/images/{ref}/state"
    return Op("POST", path, model(CatalogImagePublic), json=body, body=ImageStateChange)


def make_default_image(ref: str) -> Op[CatalogImagePublic]:
    return Op("POST", f"/v1/admin/images/{ref}/default", model(CatalogImagePublic))


def build_catalog_image(ref: str, no_cache: bool) -> Op[ImageBuildPublic]:
    params = {"noCache": "true"} if no_cache else None
    path = f"/v1/admin/images/{ref}/builds"
    return Op("POST", path, model(ImageBuildPublic), params=params)


def image_build(build_id: str, start: int) -> Op[ImageBuildPublic]:
    params = {"from": start} if start else None
    path = f"/v1/admin/image-builds/{build_id}"
    return Op("GET", path, model(ImageBuildPublic), params=params)


def import_catalog() -> Op[CatalogImportPublic]:
    return Op("POST", "/v1/admin/image-imports", model(CatalogImportPublic))


def audit(
    actor: str | None, action: str | None, target: str | None, before: float | None, limit: int
) -> Op[AuditPage]:
    found = {"actor": actor, "action": action, "target": target, "before": before}
    params = {name: value for name, value in found.items() if value is not None}
    return Op("GET", "/v1/admin/audit", model(AuditPage), params={**params, "limit": limit})
