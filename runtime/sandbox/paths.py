"""Path rules of the workspace and file-name sanitising.

Paths from the agent are checked here, lexically, before anything touches a
sandbox; the sandbox side (``siesta-fs``, openat2 with RESOLVE_BENEATH) then
enforces the same boundary against symlinks. Both must agree to let a path
through.
"""

from __future__ import annotations

import posixpath
import re

from siesta_contract.text import WORKSPACE_PATH, is_non_blank_text

from runtime.core.errors import InvalidPath, PathOutsideWorkspace
from runtime.seams.providers import WORKSPACE

MAX_NAME_BYTES = 255
"""Longest file or folder name (the Linux limit)."""
STAGING_FOLDER = "in"
"""Inputs are staged to ``/mnt/work/in``."""

_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_DOT_RUNS = re.compile(r"\.{2,}")
_WORKSPACE_PATH = re.compile(WORKSPACE_PATH)


def workspace_path(path: str, *, max_bytes: int, allow_root: bool = False) -> str:
    """The normalized path relative to ``/mnt/work``, or an error.

    Relative paths are taken from ``/mnt/work``; an absolute path is accepted
    only when it lies under ``/mnt/work`` (the agent gets such paths back in
    ``stagedFiles``). ``..`` may move around inside the workspace, never out.
    """
    if "\x00" in path:
        msg = "path contains a NUL byte"
        raise InvalidPath(msg, path=path.replace("\x00", "\\0"))
    if not is_non_blank_text(path):
        msg = "path is empty"
        raise InvalidPath(msg, path=path)
    size = len(path.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        msg = f"path is {size} bytes, over the limit of {max_bytes} bytes"
        raise InvalidPath(msg, path=path[:200], limit=max_bytes, unit="bytes")
    if not _WORKSPACE_PATH.fullmatch(path):  # the schema's rule: outside, or climbing out
        msg = f"{path!r} is outside the workspace {WORKSPACE}; use a path relative to it"
        raise PathOutsideWorkspace(msg, path=path)
    if path.startswith("/"):
        relative = posixpath.relpath(posixpath.normpath(path), WORKSPACE)
    else:
        relative = posixpath.normpath(path)
    if relative == ".." or relative.startswith("../"):
        msg = f"{path!r} leaves the workspace {WORKSPACE}"
        raise PathOutsideWorkspace(msg, path=path)
    if relative == "." and not allow_root:
        msg = f"{path!r} names the workspace itself, not a file"
        raise InvalidPath(msg, path=path)
    for part in relative.split("/"):
        if len(part.encode("utf-8", errors="surrogatepass")) > MAX_NAME_BYTES:
            msg = f"a name in {path[:200]!r} is over the limit of {MAX_NAME_BYTES} bytes"
            raise InvalidPath(msg, path=path[:200], limit=MAX_NAME_BYTES, unit="bytes")
    return relative


def absolute_path(relative: str) -> str:
    return WORKSPACE if relative == "." else f"{WORKSPACE}/{relative}"


def sanitize_file_name(name: str) -> str:
    """A name made of ``[A-Za-z0-9._-]`` only: other characters become ``_``,
    runs of dots collapse to one, leading dots go (no hidden files, no ``..``)."""
    cleaned = _DOT_RUNS.sub(".", _UNSAFE_NAME_CHARS.sub("_", name)).lstrip(".")
    cleaned = cleaned[:MAX_NAME_BYTES]
    return cleaned or "file"


def unique_names(names: list[str]) -> list[str]:
    """Sanitised names, made unique by numbering repeats before the extension
    (``a.csv``, ``a-2.csv``, ``a-3.csv``)."""
    taken: set[str] = set()
    result = []
    for name in names:
        candidate = sanitize_file_name(name)
        stem, dot, extension = candidate.rpartition(".")
        if not stem:
            stem, dot, extension = candidate, "", ""
        counter = 1
        while candidate in taken:
            counter += 1
            candidate = f"{stem}-{counter}{dot}{extension}"
        taken.add(candidate)
        result.append(candidate)
    return result
