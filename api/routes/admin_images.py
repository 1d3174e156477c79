"""The image catalog, changed while the service runs: the ``admin`` scope.

Every instance reads the catalog from the store at each call, so a change made here
applies everywhere at once. Builds run on the instance asked; their progress is
read from the store (``GET /v1/admin/image-builds/{id}``, or as server-sent events
with ``/events``), so any instance can show it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import StreamingResponse

from siesta_contract.admin import (
    BUILD_ID,
    IMAGE_SELECTION,
    CatalogImageDetail,
    CatalogImagePublic,
    CatalogImagesPublic,
    CatalogImportPublic,
    ContextSource,
    DockerfileSource,
    ImageBuildPublic,
    ImageSessionPublic,
    ImageStateChange,
    NewCatalogImage,
    NewCatalogImageAnswer,
)

from api.audit import api_actor
from api.deps import CallerDep, ServicesDep, every_org, requires
from api.responses import COMMON, error_responses
from api.streaming import KEEPALIVE, SSE_CONTENT
from runtime.admin.images import CatalogAdmin
from runtime.core.errors import CatalogImageNotFound
from runtime.core.operator_records import ImageBuild
from runtime.images.catalog import CatalogImage, ImageState

BUILD_POLL_SECONDS = 0.25

router = APIRouter(
    tags=["admin"],
    dependencies=[*requires("admin"), *every_org("the image catalog")],
    responses=error_responses(*COMMON),
)
ImageRef = Annotated[
    str, Path(pattern=IMAGE_SELECTION, description="`id:tag`, or `id` for its default tag")
]
BuildId = Annotated[str, Path(pattern=BUILD_ID)]
NOT_FOUND = error_responses(404)
CONFLICT = error_responses(404, 409)


@router.get("/v1/admin/images")
def list_images(services: ServicesDep) -> CatalogImagesPublic:
    """Every version, whatever its state, with how many sessions run it."""
    admin = services.images
    usage = admin.usage()
    contents = admin.contents()  # read once: a listing is one catalog
    return CatalogImagesPublic(
        images=[
            image_public(admin, i, usage.get(i.ref, 0), contents.defaults.get(i.id) == i.tag)
            for i in contents.images
        ]
    )


@router.post("/v1/admin/images", status_code=201, responses=CONFLICT)
def add_image(
    body: NewCatalogImage, services: ServicesDep, caller: CallerDep, request: Request
) -> NewCatalogImageAnswer:
    """A new version, disabled until enabled; its build starts at once (``build``)."""
    admin = services.images
    if isinstance(body.source, ContextSource):
        folder = admin.root / body.source.context
        if not (folder / "Dockerfile").is_file():
            msg = f"the catalog has no build context {body.source.context!r} (no Dockerfile in it)"
            raise CatalogImageNotFound(msg, context=body.source.context)
    image = CatalogImage(
        id=body.id,
        tag=body.tag,
        title=body.title,
        description=body.description,
        image=body.image or f"siesta-catalog/{body.id}:{body.tag}",
        enabled=False,
        build=body.source.context if isinstance(body.source, ContextSource) else None,
        dockerfile=body.source.dockerfile if isinstance(body.source, DockerfileSource) else None,
        runtime=body.runtime,
        workspace_size_mb=body.workspaceSizeMb,
        allow_setuid=body.allowSetuid,
    )
    who = api_actor(caller, request)
    added = admin.add(image, default=body.default, actor=who)
    build = admin.start_build(added.ref, who) if body.build and added.buildable else None
    return NewCatalogImageAnswer(
        image=image_public(admin, admin.get(added.ref), 0),
        build=build_public(build) if build else None,
    )


@router.post("/v1/admin/image-imports")
def import_catalog_file(
    services: ServicesDep, caller: CallerDep, request: Request
) -> CatalogImportPublic:
    """Apply the catalog file (``SIESTA_IMAGES__CATALOG_PATH``) again: its versions'
    definitions replace the store's (a retired one stays retired), new ones are added."""
    result = services.images.reimport(api_actor(caller, request))
    return CatalogImportPublic(added=result.added, updated=result.updated)


@router.get("/v1/admin/images/{ref}", responses=NOT_FOUND)
def show_image(ref: ImageRef, services: ServicesDep) -> CatalogImageDetail:
    """One version, who runs it, and its builds."""
    admin = services.images
    image = admin.get(ref)
    sessions = admin.sessions_on(image)
    public = image_public(admin, image, len(sessions))
    return CatalogImageDetail(
        **public.model_dump(),
        sessions=[
            ImageSessionPublic(
                org=s.org,
                conversationId=s.conversation,
                status=s.status.value,
                lastUsedAt=s.last_used_at,
            )
            for s in sessions
        ],
        builds=[build_public(b) for b in admin.builds(image)],
    )


@router.post("/v1/admin/images/{ref}/state", responses=CONFLICT)
def change_state(
    ref: ImageRef,
    body: ImageStateChange,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
) -> CatalogImagePublic:
    """Enable, disable or retire a version (a retired one refuses new sessions)."""
    admin = services.images
    changed = admin.set_state(ref, ImageState(body.state), api_actor(caller, request))
    return image_public(admin, admin.get(changed.ref), len(admin.sessions_on(changed)))


@router.post("/v1/admin/images/{ref}/default", responses=CONFLICT)
def make_default(
    ref: ImageRef, services: ServicesDep, caller: CallerDep, request: Request
) -> CatalogImagePublic:
    """Make this version the one an agent selecting its id alone gets."""
    admin = services.images
    image = admin.set_default(ref, api_actor(caller, request))
    return image_public(admin, admin.get(image.ref), len(admin.sessions_on(image)))


@router.post("/v1/admin/images/{ref}/builds", status_code=202, responses=CONFLICT)
def start_build(
    ref: ImageRef,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    no_cache: Annotated[bool, Query(alias="noCache")] = False,
) -> ImageBuildPublic:
    """Build (or rebuild) the version; follow it at ``/v1/admin/image-builds/{id}``.
    Sandboxes already made keep their image; new ones get the new build. ``noCache``:
    run every step again (e.g. to take in upstream package updates)."""
    who = api_actor(caller, request)
    return build_public(services.images.start_build(ref, who, no_cache=no_cache))


@router.get("/v1/admin/image-builds/{build_id}", responses=NOT_FOUND)
def show_build(
    build_id: BuildId,
    services: ServicesDep,
    start: Annotated[int, Query(alias="from", ge=0)] = 0,
) -> ImageBuildPublic:
    """A build's state and its log's lines from ``from`` on."""
    admin = services.images
    build = admin.build(build_id)
    return build_public(build, admin.build_log(build_id, start))


@router.get(
    "/v1/admin/image-builds/{build_id}/events",
    responses={
        200: {
            "description": "One `log` event per line of the build's log (its text), from "
            "the first; then `done` with the build (`ImageBuildPublic`, JSON).",
            "content": SSE_CONTENT,
        },
        **NOT_FOUND,
    },
    response_class=StreamingResponse,
)
def follow_build(build_id: BuildId, services: ServicesDep) -> StreamingResponse:
    """The build's progress as server-sent events, until it ends."""
    admin = services.images
    admin.build(build_id)  # 404 before the stream starts
    return StreamingResponse(
        build_events(admin, build_id, services.settings.http.sse_keepalive_seconds),
        media_type="text/event-stream",
    )


async def build_events(admin: CatalogAdmin, build_id: str, keepalive: float) -> AsyncIterator[str]:
    """Log lines as they are appended to the store (by whichever instance builds),
    then the build's end. Shared with the console's Images page."""
    sent = 0
    quiet = 0.0
    while True:
        build = await asyncio.to_thread(admin.build, build_id)
        lines = await asyncio.to_thread(admin.build_log, build_id, sent)
        for line in lines:
            yield f"event: log\ndata: {json.dumps(line)}\n\n"
        sent += len(lines)
        if build.state != "running":  # read before the log: the log read is complete
            yield f"event: done\ndata: {build_public(build).model_dump_json()}\n\n"
            return
        quiet = 0.0 if lines else quiet + BUILD_POLL_SECONDS
        if quiet >= keepalive:
            quiet = 0.0
            yield KEEPALIVE
        await asyncio.sleep(BUILD_POLL_SECONDS)


def image_public(
    admin: CatalogAdmin, image: CatalogImage, sessions: int, default: bool | None = None
) -> CatalogImagePublic:
    """``default``: whether it is its id's default tag (read from the catalog if not given)."""
    builds = admin.builds(image, 1)
    if default is None:
        default = admin.catalog.selection_of(image) == image.id
    return CatalogImagePublic(
        id=image.id,
        tag=image.tag,
        ref=image.ref,
        default=default,
        title=image.title,
        description=image.description,
        image=image.image,
        state=image.state.value,
        digest=image.digest,
        builtAt=image.built_at,
        buildContext=image.build,
        dockerfile=image.dockerfile,
        runtime=image.runtime,
        workspaceSizeMb=image.workspace_size_mb,
        allowSetuid=image.allow_setuid,
        sessionCount=sessions,
        updatedAt=image.updated_at,
        updatedBy=image.updated_by,
        lastBuild=build_public(builds[0]) if builds else None,
    )


def build_public(build: ImageBuild, log: list[str] | None = None) -> ImageBuildPublic:
    return ImageBuildPublic(
        buildId=build.build_id,
        ref=build.ref,
        state=build.state,
        requestedBy=build.requested_by,
        startedAt=build.started_at,
        finishedAt=build.finished_at,
        digest=build.digest,
        error=build.error,
        log=log,
    )
