"""Images: the live catalog (every version, its state, digest, build time and how many
sessions run it), a version's detail with who still uses it, adding a version from a
Dockerfile, building it with the build's log streamed into the page, and enabling,
disabling, retiring (confirmed first) or making it the default tag.

Every change goes through ``services.images`` (``runtime/admin/images.py``), as
``/v1/admin/images`` does; it records the audit entry itself (``via="console"``).
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import quote

from anyio import to_thread
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from pydantic import ValidationError

from api.console.auth import ActionSession, PageSession, source_of
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from api.errors import status_for
from api.routes.admin_images import build_events
from runtime.admin.images import Actor
from runtime.core.errors import SiestaError
from runtime.core.operator_records import ConsoleSession
from runtime.images.catalog import CatalogImage, ImageState
from runtime.services import Services

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

StateAction = Literal["enable", "disable", "retire"]
STATES: dict[str, ImageState] = {
    "enable": ImageState.ENABLED,
    "disable": ImageState.DISABLED,
    "retire": ImageState.RETIRED,
}
RETIRE_EFFECT = (
    "A retired version refuses every new conversation, for good: it is neither enabled "
    "nor built again (add a new tag instead). Conversations already on it keep it."
)
Field = Annotated[str, Form(max_length=200)]


def _actor(session: ConsoleSession, request: Request) -> Actor:
    return Actor(session.token_name, source_of(request), "console")


@router.get(f"{PREFIX}/images")
def images(services: ServicesDep, session: PageSession) -> HTMLResponse:
    return _list(services, session)


def _list(
    services: Services,
    session: ConsoleSession,
    *,
    status: int = 200,
    error: SiestaError | None = None,
    form: dict[str, str] | None = None,
) -> HTMLResponse:
    admin = services.images
    usage = admin.usage()
    contents = admin.contents()  # read once: the page shows one catalog
    rows = [
        (image, contents.defaults.get(image.id) == image.tag, usage.get(image.ref, 0))
        for image in contents.images
    ]
    return render(
        session,
        "images.html",
        page="images",
        status=status,
        rows=rows,
        last_builds={image.ref: _last_build(services, image) for image, _, _ in rows},
        error=error,
        form=form or {},
    )


def _last_build(services: Services, image: CatalogImage) -> str:
    builds = services.images.builds(image, 1)
    return builds[0].state if builds else ""


@router.post(f"{PREFIX}/images")
async def add(
    request: Request,
    services: ServicesDep,
    session: ActionSession,
    image_id: Annotated[str, Form(alias="id", max_length=64)] = "",
    tag: Annotated[str, Form(max_length=64)] = "latest",
    title: Field = "",
    description: Annotated[str, Form(max_length=2000)] = "",
    dockerfile: Annotated[str, Form(max_length=65536)] = "",
) -> Response:
    """A new version from a Dockerfile: added disabled, its build started at once."""
    form = {"id": image_id, "tag": tag, "title": title, "description": description}
    form["dockerfile"] = dockerfile
    try:
        image = CatalogImage(
            id=image_id.strip(),
            tag=tag.strip() or "latest",
            title=title.strip(),
            description=description.strip(),
            image=f"siesta-catalog/{image_id.strip()}:{tag.strip() or 'latest'}",
            enabled=False,
            dockerfile=dockerfile.replace("\r\n", "\n") or None,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        error = SiestaError(f"the new version is not valid: {problems}", code="invalid_request")
        return _list(services, session, status=422, error=error, form=form)
    who = _actor(session, request)

    def add_and_build() -> str:
        added = services.images.add(image, default=False, actor=who)
        if not added.buildable:
            return f"{PREFIX}/images/{quote(added.ref)}"
        build = services.images.start_build(added.ref, who)
        return f"{PREFIX}/image-builds/{build.build_id}"

    try:
        location = await to_thread.run_sync(add_and_build)
    except SiestaError as error:
        failed = error
        return await to_thread.run_sync(
            lambda: _list(services, session, status=status_for(failed), error=failed, form=form)
        )
    return RedirectResponse(location, 303)


@router.get(f"{PREFIX}/images/{{ref}}")
def image(ref: str, services: ServicesDep, session: PageSession, done: str = "") -> HTMLResponse:
    return _detail(services, session, ref, done=done)


def _detail(
    services: Services,
    session: ConsoleSession,
    ref: str,
    *,
    status: int = 200,
    error: SiestaError | None = None,
    done: str = "",
) -> HTMLResponse:
    admin = services.images
    found = admin.catalog.find(ref)
    if found is None:
        return render(session, "missing.html", page="images", status=404, what=f"image {ref}")
    return render(
        session,
        "image.html",
        page="images",
        status=status,
        image=found,
        default=admin.catalog.selection_of(found) == found.id,
        sessions=admin.sessions_on(found),
        builds=admin.builds(found),
        error=error,
        done=done if done in ("enabled", "disabled", "retired", "default", "built") else "",
    )


@router.get(f"{PREFIX}/images/{{ref}}/retire")
def confirm_retire(ref: str, services: ServicesDep, session: PageSession) -> HTMLResponse:
    found = services.images.catalog.find(ref)
    if found is None:
        return render(session, "missing.html", page="images", status=404, what=f"image {ref}")
    return render(
        session,
        "image_retire.html",
        page="images",
        image=found,
        sessions=services.images.sessions_on(found),
        effect=RETIRE_EFFECT,
    )


@router.post(f"{PREFIX}/images/{{ref}}/{{action}}")
async def change(
    request: Request,
    ref: str,
    action: Literal["enable", "disable", "retire", "default", "build"],
    services: ServicesDep,
    session: ActionSession,
    no_cache: Annotated[str, Form(alias="noCache", max_length=10)] = "",
) -> Response:
    who = _actor(session, request)
    admin = services.images

    def perform() -> str:
        if action == "build":
            build = admin.start_build(ref, who, no_cache=bool(no_cache))
            return f"{PREFIX}/image-builds/{build.build_id}"
        if action == "default":
            admin.set_default(ref, who)
            return f"{PREFIX}/images/{quote(ref)}?done=default"
        changed = admin.set_state(ref, STATES[action], who)
        return f"{PREFIX}/images/{quote(changed.ref)}?done={changed.state.value}"

    try:
        location = await to_thread.run_sync(perform)
    except SiestaError as error:
        failed = error
        return await to_thread.run_sync(
            lambda: _detail(services, session, ref, status=status_for(failed), error=failed)
        )
    return RedirectResponse(location, 303)


@router.get(f"{PREFIX}/image-builds/{{build_id}}")
def build(build_id: str, services: ServicesDep, session: PageSession) -> HTMLResponse:
    """The build's log so far; the page's script streams the rest in (without script,
    reloading the page shows how far it got)."""
    admin = services.images
    try:
        found = admin.build(build_id)
    except SiestaError:
        return render(session, "missing.html", page="images", status=404, what=f"build {build_id}")
    return render(
        session,
        "image_build.html",
        page="images",
        build=found,
        log=admin.build_log(build_id),
    )


@router.get(f"{PREFIX}/image-builds/{{build_id}}/events")
def build_stream(build_id: str, services: ServicesDep, session: PageSession) -> Response:
    """The build's log lines and its end as server-sent events (the page's script)."""
    admin = services.images
    try:
        admin.build(build_id)
    except SiestaError:
        return Response(status_code=404)
    keepalive = services.settings.http.sse_keepalive_seconds
    return StreamingResponse(
        build_events(admin, build_id, keepalive), media_type="text/event-stream"
    )
