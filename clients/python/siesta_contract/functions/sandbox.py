"""The five sandbox functions: arguments and results, as the reference names them.

The text rules (non-blank command, path shape) are stated in the schema and
enforced by the service with the functions' own error codes; limits that are
settings (bytes, counts) are in the descriptions and errors say the limit in force.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from siesta_contract.base import Arguments, Result
from siesta_contract.files import FilePublic
from siesta_contract.text import NON_BLANK_TEXT, WORKSPACE_FILE_PATH, WORKSPACE_PATH

PATH_RULES: JsonDict = {"minLength": 1, "pattern": WORKSPACE_PATH}
FILE_PATH_RULES: JsonDict = {"minLength": 1, "pattern": WORKSPACE_FILE_PATH}


class RunCommandArgs(Arguments):
    command: str = Field(
        description="The command, run by a fresh `bash -lc` in /mnt/work",
        json_schema_extra={"minLength": 1, "pattern": NON_BLANK_TEXT},
    )
    timeoutSeconds: int | None = Field(
        None, ge=1, description="Wall-clock limit in seconds; larger values are capped"
    )
    files: list[str] | None = Field(
        None,
        description="Conversation files (names or ids) to stage under /mnt/work/in first",
    )


class WriteFileArgs(Arguments):
    path: str = Field(description="Path relative to /mnt/work", json_schema_extra=FILE_PATH_RULES)
    content: str = Field(description="UTF-8 text")


class ReadFileArgs(Arguments):
    path: str = Field(description="Path relative to /mnt/work", json_schema_extra=FILE_PATH_RULES)
    maxBytes: int | None = Field(
        None, ge=1, description="Most bytes to return (capped by the deployment)"
    )
    offset: int = Field(
        0,
        ge=0,
        description="Byte to start at, for reading a large file page by page: pass the "
        "previous result's nextOffset. Past the end of the file is an error "
        "(offset_past_end)",
    )


class ListFilesArgs(Arguments):
    path: str = Field(".", description="Folder relative to /mnt/work", json_schema_extra=PATH_RULES)


class PublishFilesArgs(Arguments):
    paths: list[str] = Field(min_length=1, description="Files relative to /mnt/work")


class SessionFields(Result):
    """What every sandbox function says about the session that served it."""

    workspaceReset: bool
    """True when this call had to start afresh because the workspace was gone (removed
    outside the service, or the session retired): files and packages are gone."""
    workspaceResetReason: Literal["workspace_missing", "retired", "lost"] | None = None
    """Why, when ``workspaceReset``: ``workspace_missing`` (the workspace was removed),
    ``retired`` (idle past the deployment's retirement age), ``lost`` (reconciliation
    found sandbox and workspace gone)."""
    resumed: Literal["paused", "stopped"] | None
    """The sandbox was brought back for this call: ``paused`` (frozen processes thawed,
    nothing lost), ``stopped`` (suspended, or stopped by an engine restart, a reboot or by
    hand: files and installed packages kept, processes had ended)."""
    sandboxRecreated: bool = False
    """The sandbox could not be started any more and was made again around the same
    workspace: files in /mnt/work kept, packages installed outside it gone."""
    sessionId: str


class OutputTruncation(Result):
    stdout: bool
    stderr: bool
    stdoutBytes: int
    stderrBytes: int
    limitBytes: int


class StagedFile(Result):
    name: str
    fileId: str
    path: str
    size: int


class LimitReached(Result):
    """A sandbox limit the command ran into, with the value in force."""

    limit: Literal["timeout", "output", "memory", "processes", "workspace_disk", "container_disk"]
    value: int
    unit: Literal["seconds", "bytes", "MiB", "processes"]
    message: str


class RunCommandResult(SessionFields):
    exitCode: int
    stdout: str
    stderr: str
    timedOut: bool
    timeoutSeconds: int
    truncated: OutputTruncation
    durationMs: int
    stagedFiles: list[StagedFile]
    limitsReached: list[LimitReached] = Field(default_factory=list)
    """Limits the command ran into (memory, processes, disk, timeout, output): what
    explains an exit code such as 137, or a ``No space left on device``."""


class WriteFileResult(SessionFields):
    path: str
    size: int


class ReadFileResult(SessionFields):
    path: str
    content: str
    encoding: Literal["utf-8", "base64"]
    size: int
    """The whole file's size in bytes."""
    offset: int
    """Where this page starts: the requested offset, moved forward to the next
    character when it fell inside a UTF-8 character."""
    returnedBytes: int
    nextOffset: int | None
    """Where the next page starts; ``None`` when this page reaches the end."""
    truncated: bool
    """More of the file follows this page (``nextOffset`` is set)."""
    limitBytes: int


class DirEntryPublic(Result):
    name: str
    size: int
    isDirectory: bool
    type: Literal["file", "directory", "symlink", "other"]


class ListFilesResult(SessionFields):
    path: str
    entries: list[DirEntryPublic]
    total: int
    truncated: bool
    limitEntries: int


class PublishError(Result):
    model_config = ConfigDict(extra="allow")

    code: str
    message: str


def _absent(value: object) -> bool:
    return value is None


class PublishOutcome(Result):
    """One path: ``artifact`` when it was published, else ``error`` (never both)."""

    path: str
    artifact: FilePublic | None = Field(None, exclude_if=_absent)
    error: PublishError | None = Field(None, exclude_if=_absent)


class PublishFilesResult(SessionFields):
    files: list[PublishOutcome]
    published: int
    failed: int
    partial: bool
