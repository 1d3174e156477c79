"""The file system of a conversation's sandbox beyond the workspace functions: stat,
list with depth, make folders, move, remove, watch (``/v1/conversations/{id}/sandbox/fs``).

Paths are anywhere in the sandbox; a relative one is relative to the workspace
(``/mnt/work``). Each call runs as a user of the sandbox (default ``root``, as
``runCommand``), so the sandbox's own permissions decide what it may touch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from siesta_contract.processes import ProcessUser

SandboxPath = Annotated[
    str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[^\x00]+$")
]


class FsPathArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: SandboxPath
    user: ProcessUser | None = None
    """A user of the sandbox's image (default ``root``)."""


class FsListArgs(FsPathArgs):
    depth: Annotated[int, Field(ge=1, le=64)] = 1
    """How many levels below ``path`` (1: its own entries)."""


class FsMoveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: SandboxPath
    destination: SandboxPath
    """Its new path (folders on the way are made); an existing file there is replaced."""
    user: ProcessUser | None = None


class FsEntry(BaseModel):
    name: str
    path: str
    """Absolute, symlinks not followed."""
    type: Literal["file", "directory", "other"]
    """Of what a symlink points to."""
    size: int
    mode: int
    """Permission bits (e.g. 420 for ``0o644``)."""
    permissions: str
    """As ``ls -l`` shows them (``-rw-r--r--``)."""
    owner: str
    group: str
    modifiedAt: float
    """Seconds since the epoch."""
    symlinkTarget: str | None
    """Where it points (an absolute path, as envd shows it), when it is a symlink."""


class FsEntries(BaseModel):
    entries: list[FsEntry]
    """Sorted by path."""


class FsWatchArgs(FsPathArgs):
    recursive: bool = False
    """Every folder under it too, those made later included."""


class FsWatcher(BaseModel):
    id: str
    path: str


class FsChange(BaseModel):
    """One change a watcher saw (also the data of its stream's ``change`` events)."""

    type: Literal["create", "write", "remove", "rename", "chmod"]
    name: str
    """Relative to the watched folder."""


class FsChanges(BaseModel):
    changes: list[FsChange]
    """Since the last read, oldest first."""
    dropped: int = 0
    """Changes lost since the last read: more came than the watcher keeps unread
    (``limitBytes``), or the kernel's queue overflowed (counted as one). Read again
    soon, or list the folder to see where it stands."""
    limitBytes: int | None = None
    """What the watcher keeps unread (``SIESTA_PROCESSES__MAX_WATCHER_BYTES``)."""
