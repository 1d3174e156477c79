"""Conversation files: uploads from the backend, listing, downloads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, File, Query, UploadFile
from fastapi.responses import StreamingResponse

from siesta_contract.files import FilePublic, FilesPublic
from siesta_contract.text import FILE_NAME, MAX_FILE_NAME_CHARS

from api.deps import ContextDep, ServicesDep, requires
from api.responses import CONVERSATION, error_responses
from runtime.files.conversation import CHUNK
from runtime.functions.files import file_public

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/files",
    tags=["files"],
    dependencies=requires("sandbox"),
    responses=error_responses(*CONVERSATION, 404),
)


@router.post("", status_code=201)
def upload_file(
    ctx: ContextDep,
    services: ServicesDep,
    # "binary" as well as 3.1's contentMediaType: what generators (and fuzzers) read as
    # "any bytes", which a file part is.
    file: Annotated[UploadFile, File(json_schema_extra={"format": "binary"})],
    name: Annotated[
        str | None,
        Query(
            description="Display name instead of the uploaded file's own",
            json_schema_extra={"pattern": FILE_NAME, "maxLength": MAX_FILE_NAME_CHARS},
        ),
    ] = None,
) -> FilePublic:
    """Attach a file to the conversation (multipart part ``file``; the query's ``name``
    overrides the part's own file name). The body is spooled to disk, never held whole."""

    def chunks() -> Iterator[bytes]:
        while chunk := file.file.read(CHUNK):
            yield chunk

    given = name if name is not None else file.filename or "upload"  # "" is refused
    record = services.files.upload(ctx, given, file.content_type, chunks())
    return file_public(record)


@router.get("")
def list_files(ctx: ContextDep, services: ServicesDep) -> FilesPublic:
    """The conversation's attachments and artifacts, oldest first."""
    return FilesPublic(files=[file_public(record) for record in services.files.list_files(ctx)])


@router.get(
    "/{file_id}/content",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The file's bytes, with its own content type",
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
def download_file(file_id: str, ctx: ContextDep, services: ServicesDep) -> StreamingResponse:
    record = services.files.get(ctx, file_id)
    disposition = f"attachment; filename*=UTF-8''{quote(record.name, safe='')}"
    return StreamingResponse(
        services.files.chunks(record),
        media_type=record.content_type,
        headers={"Content-Disposition": disposition, "Content-Length": str(record.size)},
    )
