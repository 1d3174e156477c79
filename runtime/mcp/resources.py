"""The conversation's files as MCP resources: attachments, artifacts and helpers'
working files, listed and read by the links tool results carry.

A resource's URI is the file's download link (``.../v1/conversations/{id}/files/
{fileId}/content``: the HTTP route, or a ``siesta:`` URI over stdio without
``--files-url``); reading one answers its bytes up to ``SIESTA_FILES__MAX_READ_BYTES``
(``transfer_too_large`` beyond: fetch the link over HTTP instead).
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING

import mcp_types as types

from runtime.core.errors import NotFound
from runtime.core.records import FileRecord
from runtime.mcp.caller import FileLink
from runtime.services import Services

if TYPE_CHECKING:
    from runtime.mcp.caller import McpCaller

_FILE_PATH = re.compile(r"/v1/conversations/(?P<conversation>[^/]+)/files/(?P<id>[^/]+)/content$")


def list_files(services: Services, caller: McpCaller) -> types.ListResourcesResult:
    records = services.files.list_files(caller.ctx)
    return types.ListResourcesResult(resources=[_resource(r, caller.file_link) for r in records])


def read_file(services: Services, caller: McpCaller, uri: str) -> types.ReadResourceResult:
    """The file's content; ``NotFound`` for a URI that names no file of this conversation."""
    match = _FILE_PATH.search(uri)
    if match is None or match["conversation"] != caller.ctx.conversation:
        msg = f"{uri!r} is not a file of conversation {caller.ctx.conversation!r}"
        raise NotFound(msg)
    record = services.files.get(caller.ctx, match["id"])
    data = services.files.read_bytes(record, services.settings.files.max_read_bytes)
    kind = record.content_type
    contents: types.TextResourceContents | types.BlobResourceContents
    text = _text(data) if kind.startswith("text/") else None
    if text is not None:
        contents = types.TextResourceContents(uri=uri, mime_type=kind, text=text)
    else:
        blob = base64.b64encode(data).decode()
        contents = types.BlobResourceContents(uri=uri, mime_type=kind, blob=blob)
    return types.ReadResourceResult(contents=[contents])


def _text(data: bytes) -> str | None:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _resource(record: FileRecord, link: FileLink) -> types.Resource:
    return types.Resource(
        name=record.name,
        uri=link(record.file_id),
        mime_type=record.content_type,
        size=record.size,
        description=f"conversation file ({record.kind.value})",
    )
