"""The operators' catalog of sandbox base images, and validation of a selection.

Each entry is one version of an image: its id and tag (``python:1``), title,
description, Docker image reference, the digest of its current build and its
state (enabled, disabled or retired). Every id has a default tag; an agent's
configuration selects ``id`` (the default tag) or ``id:tag``, and only enabled
versions are accepted.

The catalog lives in the store (``runtime/admin/images.py`` changes it), so every
service instance reads the same one: ``ImageCatalog.live`` reads it at each call.
The YAML file (``images/catalog.yaml``) seeds it; ``ImageCatalog.load`` reads the
file alone, for the command line and for tests.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runtime.core.errors import CatalogInvalid, ImageNotInCatalog, ImageRequired, ImageRetired

IMAGE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
SELECTION_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}(:[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$"
"""What an agent's ``baseImage`` may be: ``id`` or ``id:tag``."""
DEFAULT_TAG = "latest"
"""The tag of a YAML entry that names none."""
CATALOG_NAMESPACE = "siesta-catalog"
"""Where the service's builds write, and nowhere else: every image the deployment runs
itself (its own, the Debian base, the proxy's) is outside it."""


class ImageState(enum.StrEnum):
    ENABLED = "enabled"
    """Offered to agents; new sessions may start on it."""
    DISABLED = "disabled"
    """Hidden and refused for now (e.g. while a build is checked); may be enabled again."""
    RETIRED = "retired"
    """Refuses new sessions for good; sessions already on it keep it."""


class CatalogImage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=IMAGE_ID_PATTERN)
    tag: str = Field(DEFAULT_TAG, pattern=TAG_PATTERN)
    title: str = Field(min_length=1)
    description: str = ""
    image: str = Field(min_length=1)
    """Docker image reference the sandbox is created from."""
    enabled: bool = True
    retired: bool = False
    """Retired: never enabled again (``state`` says which of the three it is)."""
    build: str | None = None
    """Build context folder, relative to the catalog file (for ``images build``)."""
    dockerfile: str | None = None
    """A Dockerfile given inline (``POST /v1/admin/images``), built with the catalog
    folder as its context, like ``build``'s."""
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
    digest: str | None = None
    """The current build's image id (``sha256:…``), once known."""
    built_at: float | None = None
    updated_at: float | None = None
    updated_by: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _retired_is_never_enabled(cls, data: Any) -> Any:
        """``enabled`` alone decides who may start on it: a retired version has it off."""
        if isinstance(data, dict) and data.get("retired"):
            return {**data, "enabled": False}
        return data

    @property
    def ref(self) -> str:
        return f"{self.id}:{self.tag}"

    @property
    def built_as(self) -> str:
        """The one reference a build by the service may tag: one per version, inside the
        catalog's namespace (an operator's file may name any image to *run*)."""
        return f"{CATALOG_NAMESPACE}/{self.id}:{self.tag}"

    @property
    def state(self) -> ImageState:
        if self.retired:
            return ImageState.RETIRED
        return ImageState.ENABLED if self.enabled else ImageState.DISABLED

    @property
    def key(self) -> str:
        """The version and its build: what a ready pool member must match (a rebuild
        makes the members of the previous build stale)."""
        return f"{self.ref}@{self.digest}" if self.digest else self.ref

    @property
    def buildable(self) -> bool:
        return self.build is not None or self.dockerfile is not None


class CatalogFileEntry(CatalogImage):
    """A YAML entry: an image version, and whether its tag is its id's default."""

    default: bool = False


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    images: list[CatalogFileEntry]


@dataclass(frozen=True)
class CatalogContents:
    """The catalog at one moment: its versions in order, and each id's default tag."""

    images: list[CatalogImage]
    defaults: dict[str, str] = field(default_factory=dict)


def split_selection(selection: str) -> tuple[str, str | None]:
    """``id`` or ``id:tag`` → (id, tag or ``None``)."""
    image_id, _, tag = selection.partition(":")
    return image_id, tag or None


def read_catalog_file(path: Path) -> CatalogContents:
    """The YAML file's versions, and its defaults: an entry marked ``default``, else an
    id's first entry."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        parsed = _CatalogFile.model_validate(raw)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        msg = f"cannot load image catalog {path}: {exc}"
        raise CatalogInvalid(msg) from exc
    refs = [entry.ref for entry in parsed.images]
    duplicates = sorted({r for r in refs if refs.count(r) > 1})
    if duplicates:
        msg = f"image catalog lists versions more than once: {', '.join(duplicates)}"
        raise CatalogInvalid(msg)
    marked = [entry.id for entry in parsed.images if entry.default]
    twice = sorted({i for i in marked if marked.count(i) > 1})
    if twice:
        msg = f"image catalog marks more than one default tag of: {', '.join(twice)}"
        raise CatalogInvalid(msg)
    defaults = {entry.id: entry.tag for entry in parsed.images if entry.default}
    for entry in parsed.images:
        defaults.setdefault(entry.id, entry.tag)
    images = [CatalogImage.model_validate(e.model_dump(exclude={"default"})) for e in parsed.images]
    return CatalogContents(images, defaults)


class ImageCatalog:
    """The catalog as its source holds it at each call (the store's, or fixed)."""

    def __init__(self, images: list[CatalogImage], root: Path) -> None:
        """A fixed catalog; each id's first version is its default."""
        refs = [image.ref for image in images]
        duplicates = sorted({r for r in refs if refs.count(r) > 1})
        if duplicates:
            msg = f"image catalog lists versions more than once: {', '.join(duplicates)}"
            raise CatalogInvalid(msg)
        defaults: dict[str, str] = {}
        for image in images:
            defaults.setdefault(image.id, image.tag)
        fixed = CatalogContents(list(images), defaults)
        self._read: Callable[[], CatalogContents] = lambda: fixed
        self.root = root

    @classmethod
    def live(cls, read: Callable[[], CatalogContents], root: Path) -> ImageCatalog:
        """A catalog read from ``read`` at every call (the store: every instance sees
        an operator's change at once)."""
        catalog = cls([], root)
        catalog._read = read
        return catalog

    @classmethod
    def load(cls, path: Path) -> ImageCatalog:
        contents = read_catalog_file(path)
        catalog = cls([], path.parent)
        catalog._read = lambda: contents
        return catalog

    def contents(self) -> CatalogContents:
        return self._read()

    def all(self) -> list[CatalogImage]:
        return self._read().images

    def enabled(self) -> list[CatalogImage]:
        return [image for image in self._read().images if image.enabled and not image.retired]

    def find(self, selection: str) -> CatalogImage | None:
        """The version ``id:tag`` names, or ``id``'s default version."""
        return _find(self._read(), selection)

    def selection_of(self, image: CatalogImage) -> str:
        """How an agent selects this version: its id when its tag is the default."""
        defaults = self._read().defaults
        return image.id if defaults.get(image.id) == image.tag else image.ref

    def select(self, image_id: str | None) -> CatalogImage:
        """The enabled image an agent selected; the selection is required."""
        contents = self._read()
        enabled = [image for image in contents.images if image.enabled and not image.retired]
        choices = [
            image.id if contents.defaults.get(image.id) == image.tag else image.ref
            for image in enabled
        ]
        if not image_id:
            msg = f"a base image must be selected from the catalog (enabled: {', '.join(choices)})"
            raise ImageRequired(msg, enabled=choices)
        image = _find(contents, image_id)
        if image is not None and image.retired:
            msg = (
                f"base image {image_id!r} ({image.ref}) is retired and takes no new sessions "
                f"(enabled: {', '.join(choices)})"
            )
            raise ImageRetired(msg, imageId=image_id, enabled=choices)
        if image is None or not image.enabled:
            msg = (
                f"base image {image_id!r} is not an enabled catalog image "
                f"(enabled: {', '.join(choices)})"
            )
            raise ImageNotInCatalog(msg, imageId=image_id, enabled=choices)
        return image


def _find(contents: CatalogContents, selection: str) -> CatalogImage | None:
    image_id, tag = split_selection(selection)
    if tag is None:
        tag = contents.defaults.get(image_id)
    if tag is None:
        return next((i for i in contents.images if i.id == image_id), None)
    return next((i for i in contents.images if i.id == image_id and i.tag == tag), None)
