"""Knowledge bases, one org's at a time (bases belong to their org; the console names
the org it shows): the bases with their documents and passages, a base's content
versions with how their indexing goes (the page reloads itself while any is queued or
indexing), and the forms to make and delete a base, add a document (text, or a file
upload) and remove a version.

Every change goes through ``services.knowledge`` (``runtime/knowledge/bases.py``), as
``/v1/knowledge-bases`` does, and is recorded in the audit trail (``via="console"``).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from anyio import to_thread
from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from siesta_contract.knowledge import DocumentAdd, KnowledgeBaseCreate
from siesta_contract.text import ID_MAX_CHARS

from api.console.audit_hook import record_action
from api.console.auth import ActionSession, PageSession, source_of
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from api.errors import status_for
from runtime.core.errors import InvalidRequest, SiestaError
from runtime.knowledge.errors import DocumentTooLarge
from runtime.services import Services

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
ORG = Annotated[str, Query(max_length=ID_MAX_CHARS)]
UPLOAD_CHUNK = 1 << 20


@router.get(f"{PREFIX}/knowledge")
def bases(services: ServicesDep, session: PageSession, org: ORG = "") -> HTMLResponse:
    return _list(services, session, org.strip())


def _list(
    services: Services,
    session: ActionSession,
    org: str,
    *,
    status: int = 200,
    error: SiestaError | None = None,
) -> HTMLResponse:
    rows = []
    if org:
        for base in services.knowledge.list(org):
            documents, chunks = services.knowledge.counts(org, base.base_id)
            rows.append((base, documents, chunks))
    return render(
        session,
        "knowledge.html",
        page="knowledge",
        status=status,
        org=org,
        rows=rows,
        error=error,
    )


@router.post(f"{PREFIX}/knowledge/{{org}}")
async def create(
    org: str,
    request: Request,
    services: ServicesDep,
    session: ActionSession,
    name: Annotated[str, Form(max_length=128)] = "",
    description: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    def made() -> str:
        body = KnowledgeBaseCreate(name=name.strip(), description=description.strip())
        base = services.knowledge.create(org, body)
        _record(services, session, request, "knowledge_base.create", f"{org}/{base.base_id}")
        return _base_path(org, base.base_id)

    try:
        return RedirectResponse(await to_thread.run_sync(made), 303)
    except (SiestaError, ValidationError) as exc:
        failed = _refusal(exc)
        return await to_thread.run_sync(
            lambda: _list(services, session, org, status=status_for(failed), error=failed)
        )


@router.get(f"{PREFIX}/knowledge/{{org}}/{{base_id}}")
def base(
    org: str,
    base_id: str,
    services: ServicesDep,
    session: PageSession,
    done: Annotated[str, Query(max_length=20)] = "",
) -> HTMLResponse:
    return _detail(services, session, org, base_id, done=done)


def _detail(
    services: Services,
    session: ActionSession,
    org: str,
    base_id: str,
    *,
    status: int = 200,
    error: SiestaError | None = None,
    done: str = "",
) -> HTMLResponse:
    try:
        found = services.knowledge.get(org, base_id)
    except SiestaError:
        return render(
            session, "missing.html", page="knowledge", status=404, what=f"knowledge base {base_id}"
        )
    versions = services.knowledge.versions(org, base_id)
    return render(
        session,
        "knowledge_base.html",
        page="knowledge",
        status=status,
        org=org,
        base=found,
        versions=versions[::-1],  # newest first
        pending=any(v.status in ("queued", "indexing") for v in versions),
        error=error,
        done=done if done in ("added", "removed", "unchanged") else "",
    )


@router.post(f"{PREFIX}/knowledge/{{org}}/{{base_id}}/documents")
async def add(
    org: str,
    base_id: str,
    request: Request,
    services: ServicesDep,
    session: ActionSession,
    name: Annotated[str, Form(max_length=255)] = "",
    text: Annotated[str, Form(max_length=1_000_000)] = "",
    upload: Annotated[UploadFile | None, File()] = None,
) -> Response:
    """A document from the text box, or from a file (its type as the browser says)."""
    filename = upload.filename if upload is not None else ""
    content: dict[str, Any] = {"name": name.strip() or filename or ""}

    def added() -> str:
        body = DocumentAdd.model_validate(content)
        version, created = services.knowledge.add_document(org, base_id, body)
        if created:
            target = f"{org}/{base_id}/{version.version_id}"
            _record(services, session, request, "knowledge_base.add_document", target)
            services.indexer.wake()
        return f"{_base_path(org, base_id)}?done={'added' if created else 'unchanged'}"

    try:
        if upload is not None and filename:
            data = await _read(upload, services.settings.knowledge.max_document_bytes)
            content["contentBase64"] = base64.b64encode(data).decode()
            content["contentType"] = (upload.content_type or "").split(";")[0].strip()
        else:
            content["text"] = text
        return RedirectResponse(await to_thread.run_sync(added), 303)
    except (SiestaError, ValidationError) as exc:
        failed = _refusal(exc)
        return await to_thread.run_sync(
            lambda: _detail(
                services, session, org, base_id, status=status_for(failed), error=failed
            )
        )


@router.post(f"{PREFIX}/knowledge/{{org}}/{{base_id}}/documents/{{version_id}}/remove")
async def remove(
    org: str,
    base_id: str,
    version_id: str,
    request: Request,
    services: ServicesDep,
    session: ActionSession,
) -> Response:
    def removed() -> str:
        services.knowledge.remove(org, base_id, version_id)
        target = f"{org}/{base_id}/{version_id}"
        _record(services, session, request, "knowledge_base.remove_document", target)
        return f"{_base_path(org, base_id)}?done=removed"

    try:
        return RedirectResponse(await to_thread.run_sync(removed), 303)
    except SiestaError as exc:
        failed = exc
        return await to_thread.run_sync(
            lambda: _detail(
                services, session, org, base_id, status=status_for(failed), error=failed
            )
        )


@router.post(f"{PREFIX}/knowledge/{{org}}/{{base_id}}/delete")
async def delete(
    org: str, base_id: str, request: Request, services: ServicesDep, session: ActionSession
) -> Response:
    def deleted() -> str:
        services.knowledge.delete(org, base_id)
        _record(services, session, request, "knowledge_base.delete", f"{org}/{base_id}")
        return f"{PREFIX}/knowledge?{urlencode({'org': org})}"

    try:
        return RedirectResponse(await to_thread.run_sync(deleted), 303)
    except SiestaError as exc:
        failed = exc
        return await to_thread.run_sync(
            lambda: _list(services, session, org, status=status_for(failed), error=failed)
        )


def _base_path(org: str, base_id: str) -> str:
    return f"{PREFIX}/knowledge/{quote(org, safe='')}/{quote(base_id, safe='')}"


async def _read(upload: UploadFile, limit: int) -> bytes:
    """The upload's bytes, refused once past ``limit`` (never held past it)."""
    data = bytearray()
    while chunk := await upload.read(UPLOAD_CHUNK):
        data += chunk
        if len(data) > limit:
            msg = f"the file is over {limit} bytes (SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES)"
            raise DocumentTooLarge(msg, limit=limit, unit="bytes")
    return bytes(data)


def _refusal(exc: SiestaError | ValidationError) -> SiestaError:
    if isinstance(exc, SiestaError):
        return exc
    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return InvalidRequest(f"not valid: {problems}")


def _record(
    services: Services, session: ActionSession, request: Request, action: str, target: str
) -> None:
    record_action(services, session.token_name, action, target, source=source_of(request))
