"""The operators' catalog of sandbox base images, and validation of a selection.

The catalog is a YAML file (``images/catalog.yaml``) listing, per image, its
id, title, description, Docker image reference and whether it is enabled. An
agent's configuration selects one image by id; only enabled ids are accepted.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.core.errors import CatalogInvalid, ImageNotInCatalog, ImageRequired

IMAGE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class CatalogImage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=IMAGE_ID_PATTERN)
    title: str = Field(min_length=1)
    description: str = ""
    image: str = Field(min_length=1)
    """Docker image reference the sandbox is created from."""
    enabled: bool = True
    build: str | None = None
    """Build context folder, relative to the catalog file (for ``images build``)."""
    runtime: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    """Docker: the OCI runtime sandboxes of this image run under, e.g. ``runsc``
    (gVisor; ``SIESTA_GVISOR=1 make run`` registers it). Default: the engine's own."""
    workspace_size_mb: int | None = Field(None, ge=0)
    """This image's ``/mnt/work`` size, instead of ``SIESTA_SANDBOX__WORKSPACE_SIZE_MB``
    (0: no limit)."""
    allow_setuid: bool = False
    """Let setuid programs raise a sandbox user's privileges (``sudo``): sandboxes of this
    image run without ``no-new-privileges``. For images whose user is meant to become
    root (E2B's ``base``): root is the API's to give already (``user="root"``), and the
    sandbox's capabilities stay the same seven. gVisor keeps the flag set whatever."""


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    images: list[CatalogImage]


class ImageCatalog:
    """The catalog as loaded from its file; immutable once built."""

    def __init__(self, images: list[CatalogImage], root: Path) -> None:
        ids = [image.id for image in images]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            msg = f"image catalog lists ids more than once: {', '.join(duplicates)}"
            raise CatalogInvalid(msg)
        self._images = {image.id: image for image in images}
        self.root = root

    @classmethod
    def load(cls, path: Path) -> ImageCatalog:
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            parsed = _CatalogFile.model_validate(raw)
        except (OSError, yaml.YAMLError, ValidationError) as exc:
            msg = f"cannot load image catalog {path}: {exc}"
            raise CatalogInvalid(msg) from exc
        return cls(parsed.images, path.parent)

    def all(self) -> list[CatalogImage]:
        return list(self._images.values())

    def enabled(self) -> list[CatalogImage]:
        return [image for image in self._images.values() if image.enabled]

    def find(self, image_id: str) -> CatalogImage | None:
        return self._images.get(image_id)

    def select(self, image_id: str | None) -> CatalogImage:
        """The enabled image an agent selected; the selection is required."""
        if not image_id:
            choices = ", ".join(image.id for image in self.enabled())
            msg = f"a base image must be selected from the catalog (enabled: {choices})"
            raise ImageRequired(msg, enabled=[image.id for image in self.enabled()])
        image = self._images.get(image_id)
        if image is None or not image.enabled:
            choices = ", ".join(i.id for i in self.enabled())
            msg = f"base image {image_id!r} is not an enabled catalog image (enabled: {choices})"
            raise ImageNotInCatalog(msg, imageId=image_id, enabled=[i.id for i in self.enabled()])
        return image
