"""The file system of a conversation's sandbox beyond the workspace functions: stat,
list with depth, make folders, move, remove, watch, and files' metadata
(``/v1/conversations/{id}/sandbox/fs``).

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

MetadataKey = Annotated[
    str, StringConstraints(min_length=1, max_length=246, pattern=r"^[\x20-\x7e]+$")
]
"""Printable ASCII (E2B's rule); at most 246 bytes (the kernel's 255 for an xattr's
name, less ``user.e2b.``)."""
MetadataValue = Annotated[str, StringConstraints(pattern=r"^[\x20-\x7e]*$")]


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
    metadata: dict[str, str] = Field(default_factory=dict)
    """The file's metadata: its ``user.e2b.KEY`` extended attributes, the prefix left out
    (E2B's ``metadata``; also those a command in the sandbox set). At most
    ``SIESTA_FILES__MAX_METADATA_KEYS`` keys and ``..._BYTES`` bytes are shown."""


class FsEntries(BaseModel):
    entries: list[FsEntry]
    """Sorted by path."""


class FsMetadataArgs(FsPathArgs):
    metadata: dict[MetadataKey, MetadataValue] = Field(
        # The keys' pattern becomes patternProperties; no other key is accepted either,
        # which the document must say too (else any key looks schema-valid).
        json_schema_extra={
            "additionalProperties": False,
            "propertyNames": {"minLength": 1, "maxLength": 246, "pattern": r"^[\x20-\x7e]+$"},
        }
    )
    """Replaces the file's metadata (keys left out are removed; ``{}`` clears it), as
    E2B's ``files.write(..., metadata=...)`` does. At most
    ``SIESTA_FILES__MAX_METADATA_KEYS`` keys and ``SIESTA_FILES__MAX_METADATA_BYTES``
    bytes (keys with their ``user.e2b.`` prefix, plus values): more is refused
    (``metadata_too_large``, with ``limit``)."""


class FsWatchArgs(FsPathArgs):
    recursive: bool = False
    """Every folder under it too, those made later included."""
    includeEntry: bool = False
    """Each change that leaves something at its name (``create``, ``write``, ``chmod``)
    comes with its ``entry`` as it is when the change is read (E2B's ``include_entry``)."""
    allowNetworkMounts: bool = False
    """Watch a folder on a network file system (NFS, CIFS, SMB, FUSE) too, whose
    changes may never be seen; refused without it (E2B's ``allow_network_mounts``)."""


class FsWatcher(BaseModel):
    id: str
    path: str


class FsChange(BaseModel):
    """One change a watcher saw (also the data of its stream's ``change`` events)."""

    type: Literal["create", "write", "remove", "rename", "chmod"]
    name: str
    """Relative to the watched folder."""
    entry: FsEntry | None = None
    """What is at the name now, for a watcher made with ``includeEntry`` (none for
    ``remove`` and ``rename``, nor when it is gone already)."""


class FsChanges(BaseModel):
    changes: list[FsChange]
    """Since the last read, oldest first."""
    dropped: int = 0
    """Changes lost since the last read: more came than the watcher keeps unread
    (``limitBytes``), or the kernel's queue overflowed (counted as one). Read again
    soon, or list the folder to see where it stands."""
    limitBytes: int | None = None
    """What the watcher keeps unread (``SIESTA_PROCESSES__MAX_WATCHER_BYTES``)."""
