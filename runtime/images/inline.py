"""New versions to build (``POST /v1/admin/images``, the console): the name they may
have, what an inline Dockerfile may say, and the build context it gets.

The context is never the catalog folder as a whole: that is wherever the deployment
put its catalog file, perhaps beside other configuration, and ``COPY . /x`` would
bake all of it into an image (and ``RUN cat`` into the build log). It holds the
sources the shipped images share, regular files only: a symbolic link could lead
anywhere on the host.

``ADD`` is refused: the engine fetches an ``ADD`` URL itself, from its own network,
past the build's network confinement (``runtime.images.build_network``). ``COPY``
does the rest of what ``ADD`` does; ``RUN curl`` goes through the egress proxy.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path

from runtime.core.errors import DockerfileNotAllowed, ImageNameOutsideCatalog
from runtime.images.catalog import CatalogImage

SHARED_SOURCES = ("siesta-fs", "siesta-agent")
"""The catalog's folders an inline Dockerfile may ``COPY`` from (as the shipped images do)."""
INLINE_DOCKERFILE = "Dockerfile.siesta-inline"

# The engine joins a line ending in its escape character (``\\``, or a backtick after
# ``# escape=```) with the next before reading the instruction: so do we.
_CONTINUATION = re.compile(r"[\\`][ \t]*\r?\n")
_ADD = re.compile(r"^[ \t]*(?:onbuild[ \t]+)?add(?:\s|$)", re.IGNORECASE | re.MULTILINE)


def check_new_version(image: CatalogImage) -> None:
    """What an operator adds to build is named ``siesta-catalog/<id>:<tag>`` (refused
    otherwise, rather than renamed: the caller learns where the build goes), and its
    inline Dockerfile stays confined. One to run as it is may name any image."""
    if image.buildable and image.image != image.built_as:
        msg = (
            f"a build writes only {image.built_as} (the catalog's namespace), never "
            f"{image.image!r}: leave `image` out to build, or give no `source` to add "
            "an image the engine has"
        )
        raise ImageNameOutsideCatalog(msg, image=image.image, expected=image.built_as)
    if image.dockerfile is not None:
        check_inline_dockerfile(image.dockerfile)


def check_inline_dockerfile(text: str) -> None:
    """Refuse what would step outside the build's confinement. Both the text as written
    and with continuations joined are read, so a line split mid-keyword is caught too
    (a ``RUN`` continuation line that starts with ``add `` is refused as well: rare,
    and on the safe side)."""
    for candidate in (text, _CONTINUATION.sub("", text)):
        if _ADD.search(candidate):
            msg = (
                "an inline Dockerfile may not use ADD: the engine fetches its URLs from "
                "its own network, outside the build's; use COPY for the catalog's shared "
                f"sources ({', '.join(SHARED_SOURCES)}), or RUN curl through the egress proxy"
            )
            raise DockerfileNotAllowed(msg, instruction="ADD")


def inline_context(root: Path, dockerfile: str) -> io.BytesIO:
    """A tar build context: the shared sources under ``root`` and the Dockerfile."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in SHARED_SOURCES:
            for path in _regular_files(root / name):
                tar.add(str(path), arcname=path.relative_to(root).as_posix(), recursive=False)
        data = dockerfile.encode()
        info = tarfile.TarInfo(INLINE_DOCKERFILE)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def _regular_files(folder: Path) -> list[Path]:
    if folder.is_symlink() or not folder.is_dir():
        return []
    found = []
    for parent, _, names in os.walk(folder):  # never into a linked folder
        for name in sorted(names):
            path = Path(parent) / name
            if path.is_file() and not path.is_symlink():
                found.append(path)
    return sorted(found)
