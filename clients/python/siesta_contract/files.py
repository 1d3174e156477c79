"""How a conversation file is shown, wherever one is returned."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from siesta_contract.base import Result


class FilePublic(Result):
    """A conversation file: an attachment, an artifact, or a helper's working file."""

    id: str
    name: str
    size: int = Field(ge=0)
    contentType: str
    sha256: str
    kind: Literal["attachment", "artifact", "working"]
    createdAt: float
    messageId: str | None = None
    """The assistant message the file is attached to, when known."""


class FilesPublic(Result):
    files: list[FilePublic]
