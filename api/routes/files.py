"""Conversation files: uploads from the backend, listing, downloads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import StreamingResponse

from api.deps import Authenticated, ContextDep, ServicesDep
from runtime.files import CHUNK
from runtime.store.records import FileRecord

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/files", tags=["files"], dependencies=Authenticated
)


def file_public(record: FileRecord) -> dict[str, Any]:
    return {
        "id": record.file_id,
        "name": record.name,
        "size": record.size,
        "contentType": record.content_type,
        "sha256": record.sha256,
        "kind": record.kind.value,
        "createdAt": record.created_at,
    }


@router.post("", status_code=201)
def upload_file(
    ctx: ContextDep,
    services: ServicesDep,
    file: Annotated[UploadFile, File()],
    name: Annotated[str | None, Form()] = None,
) -> dict[str, Any]:
    """Attach a file to the conversation (multipart field ``file``; ``name`` overrides
    the uploaded file name). The body is spooled to disk, never held whole."""

    def chunks() -> Iterator[bytes]:
        while chunk := file.file.read(CHUNK):
            yield chunk

    record = services.files.upload(
        ctx, name or file.filename or "upload", file.content_type, chunks()
    )
    return file_public(record)


@router.get("")
def list_files(ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """The conversation's attachments and artifacts, oldest first."""
    return {"files": [file_public(record) for record in services.files.list_files(ctx)]}


@router.get("/{file_id}/content")
def download_file(file_id: str, ctx: ContextDep, services: ServicesDep) -> StreamingResponse:
    record = services.files.get(ctx, file_id)
    disposition = f"attachment; filename*=UTF-8''{quote(record.name, safe='')}"
    return StreamingResponse(
        services.files.chunks(record),
        media_type=record.content_type,
        headers={"Content-Disposition": disposition, "Content-Length": str(record.size)},
    )
