"""A conversation file as the API shows it (``siesta_contract.files.FilePublic``)."""

from __future__ import annotations

from siesta_contract.files import FilePublic

from runtime.core.records import FileRecord


def file_public(record: FileRecord) -> FilePublic:
    return FilePublic(
        id=record.file_id,
        name=record.name,
        size=record.size,
        contentType=record.content_type,
        sha256=record.sha256,
        kind=record.kind.value,
        createdAt=record.created_at,
        messageId=record.message_id,
    )
