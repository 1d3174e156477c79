"""Talking to ``siesta-fs``, the in-sandbox file helper (images/siesta-fs/siesta-fs.c).

The helper resolves every path with openat2(RESOLVE_BENEATH) from /mnt/work,
so the confinement holds against symlinks the agent made. This module builds
its command lines and turns its exit status into the runtime's errors.
"""

from __future__ import annotations

import re

from runtime.core.errors import (
    FileMissing,
    InvalidPath,
    NotADirectory,
    NotAFile,
    PathOutsideWorkspace,
    ProviderUnavailable,
    SiestaError,
    TransferTooLarge,
)
from runtime.providers.base import WORKSPACE, DirEntry, DirListing

HELPER = "/usr/local/lib/siesta/siesta-fs"

_KINDS = {"f": "file", "d": "directory", "l": "symlink", "o": "other"}
_STATUS_LINE = re.compile(r"^siesta-fs: (\S+) ?(.*)$", re.MULTILINE)


def read_argv(path: str, max_bytes: int, strict: bool) -> list[str]:
    return [HELPER, "read", path, str(max_bytes), *(["strict"] if strict else [])]


def write_argv(path: str, max_bytes: int) -> list[str]:
    return [HELPER, "write", path, str(max_bytes)]


def list_argv(path: str, max_entries: int) -> list[str]:
    return [HELPER, "list", path, str(max_entries)]


def status(stderr: str) -> tuple[str, dict[str, str]]:
    """The helper's last status line: its code and its ``key=value`` fields."""
    matches = _STATUS_LINE.findall(stderr)
    if not matches:
        return "missing", {}
    code, detail = matches[-1]
    fields = dict(part.split("=", 1) for part in detail.split() if "=" in part)
    return code, fields


def check(exit_code: int, stderr: str, path: str, limit: int | None = None) -> dict[str, str]:
    """The status fields of a successful run; otherwise the matching error."""
    code, fields = status(stderr)
    if exit_code == 0 and code == "ok":
        return fields
    if code == "missing" and exit_code in (126, 127):
        msg = (
            f"this sandbox's image has no file helper ({HELPER}); "
            "rebuild it with `siesta-runtime images build`"
        )
        raise ProviderUnavailable(msg)
    kind = _KINDS.get(fields.get("type", "o"), "other")
    raise error_for(code, path, limit=limit, kind=kind, detail=stderr.strip()[-300:])


def error_for(
    code: str, path: str, *, limit: int | None = None, kind: str = "other", detail: str = ""
) -> SiestaError:
    """The error for a helper status ``code`` about workspace ``path``."""
    shown = f"{WORKSPACE}/{path}" if path != "." else WORKSPACE
    if code == "not_found":
        return FileMissing(f"{shown} does not exist", path=path)
    if code == "outside":
        msg = f"{shown} resolves outside the workspace {WORKSPACE} (through a symlink)"
        return PathOutsideWorkspace(msg, path=path)
    if code == "not_a_file":
        return NotAFile(f"{shown} is a {kind}, not a regular file", path=path, type=kind)
    if code == "not_a_directory":
        return NotADirectory(f"{shown} (or a folder on its way) is not a folder", path=path)
    if code == "too_large":
        msg = f"{shown} is over the transfer limit of {limit} bytes"
        return TransferTooLarge(msg, path=path, limit=limit, unit="bytes")
    if code == "usage":
        return InvalidPath(f"{shown} is not usable here: {detail}", path=path)
    return SiestaError(f"file operation on {shown} failed: {detail}")


def parse_listing(stdout: bytes, fields: dict[str, str]) -> DirListing:
    entries = []
    for record in stdout.split(b"\0"):
        if not record:
            continue
        kind, size, name = record.split(b" ", 2)
        entries.append(
            DirEntry(
                name=name.decode("utf-8", errors="replace"),
                kind=_KINDS.get(kind.decode(), "other"),
                size=int(size),
            )
        )
    return DirListing(entries, int(fields.get("total", len(entries))))
