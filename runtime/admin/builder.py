"""The seam an engine's image builder fills (``runtime.images.build.DockerImageBuilder``):
the catalog's admin knows builders by this alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from runtime.images.catalog import CatalogImage

Progress = Callable[[str], None]


class ImageBuilder(Protocol):
    """Builds one catalog version in the deployment's engine, tagged only as its
    ``built_as`` (``siesta-catalog/<id>:<tag>``); returns its digest."""

    def build(
        self, image: CatalogImage, root: Path, progress: Progress, *, no_cache: bool = False
    ) -> str: ...

    def digest_of(self, reference: str) -> tuple[str, float] | None:
        """The engine's image for ``reference``: (digest, creation time), if present."""
