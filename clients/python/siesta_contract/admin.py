"""The operators' answers (the ``admin`` scope)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


# -- the image catalog (``/v1/admin/images``) ------------------------------------------

IMAGE_ID = r"^[a-z0-9][a-z0-9._-]{0,63}$"
IMAGE_TAG = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
IMAGE_SELECTION = r"^[a-z0-9][a-z0-9._-]{0,63}(:[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$"
"""An image version: ``id:tag``, or ``id`` for its default tag."""
BUILD_ID = r"^[0-9a-f]{32}$"
MAX_DOCKERFILE_CHARS = 65536

ImageState = Literal["enabled", "disabled", "retired"]
BuildState = Literal["running", "succeeded", "failed"]


class ImageBuildPublic(BaseModel):
    buildId: str
    ref: str
    """The version built, ``id:tag``."""
    state: BuildState
    requestedBy: str
    startedAt: float
    finishedAt: float | None
    digest: str | None
    """The image the build produced (``sha256:…``)."""
    error: str | None
    log: list[str] | None = None
    """The log's lines from ``from`` on (``GET /v1/admin/image-builds/{id}``)."""


class ImageSessionPublic(BaseModel):
    org: str
    conversationId: str
    status: str
    lastUsedAt: float


class CatalogImagePublic(BaseModel):
    id: str
    tag: str
    ref: str
    """``id:tag``."""
    default: bool
    """Whether an agent selecting ``id`` alone gets this version."""
    title: str
    description: str
    image: str
    """The Docker image reference."""
    state: ImageState
    digest: str | None
    """The current build (``sha256:…``); new sandboxes start from it."""
    builtAt: float | None
    buildContext: str | None
    """The catalog folder it is built from, or ``null``."""
    dockerfile: str | None
    """Its inline Dockerfile, or ``null``."""
    runtime: str | None
    workspaceSizeMb: int | None
    allowSetuid: bool
    sessionCount: int
    """Sessions running this version now."""
    updatedAt: float | None
    updatedBy: str | None
    lastBuild: ImageBuildPublic | None


class CatalogImageDetail(CatalogImagePublic):
    sessions: list[ImageSessionPublic]
    """Who still uses it (a retired version's remaining sessions)."""
    builds: list[ImageBuildPublic]
    """Its builds, newest first (the last 20)."""


class CatalogImagesPublic(BaseModel):
    images: list[CatalogImagePublic]


class DockerfileSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dockerfile: str = Field(min_length=1, max_length=MAX_DOCKERFILE_CHARS)
    """The Dockerfile's text; its build context is the catalog's shared sources
    (``COPY siesta-fs/...`` works as in the shipped images). ``ADD`` is refused (422
    ``dockerfile_not_allowed``)."""


class ContextSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context: str = Field(pattern=IMAGE_ID)
    """A folder of the catalog (beside ``catalog.yaml``) holding a ``Dockerfile``."""


class NewCatalogImage(BaseModel):
    """A new image version: disabled until enabled (build it first)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=IMAGE_ID)
    tag: str = Field("latest", pattern=IMAGE_TAG)
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=2000)
    image: str | None = Field(
        None, pattern=r"^[a-z0-9][a-z0-9._/-]{0,200}(:[A-Za-z0-9][A-Za-z0-9._-]{0,127})?$"
    )
    """Without a ``source``: the reference of an image the engine has (to run). With
    one, leave it out: a build writes only ``siesta-catalog/{id}:{tag}`` (the default),
    and another name is refused (409 ``image_name_outside_catalog``)."""
    source: DockerfileSource | ContextSource | None = None
    """How to build it; ``null``: an image the engine has already (``image``)."""
    runtime: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    workspaceSizeMb: int | None = Field(None, ge=0, le=1048576)
    allowSetuid: bool = False
    default: bool = False
    """Make it its id's default tag (an id's first version is its default anyway)."""
    build: bool = True
    """Start building it at once (when it has a ``source``)."""


class NewCatalogImageAnswer(BaseModel):
    image: CatalogImagePublic
    build: ImageBuildPublic | None
    """The build started, if one was."""


class ImageStateChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: ImageState
    """``retired`` is for good: the version refuses new sessions, and is neither
    enabled nor built again (sessions on it keep it)."""


class CatalogImportPublic(BaseModel):
    added: list[str]
    updated: list[str]


class AuditEntryPublic(BaseModel):
    id: str
    at: float
    actor: str
    """The token's name."""
    action: str
    target: str
    source: str
    """The client's address."""
    via: Literal["api", "console", "cli"]
    details: dict[str, Any]


class AuditPage(BaseModel):
    entries: list[AuditEntryPublic]
    next: float | None
    """Pass as ``before`` for the next (older) page; ``null``: this was the last."""
