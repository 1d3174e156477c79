"""The service's version: one source, ``version`` in ``pyproject.toml``.

An installed distribution (a wheel, or ``pip install -e .``) answers from its
metadata. Code run from a checkout that was never installed reads the
``pyproject.toml`` beside it instead, so the answer is never a second copy that
drifts; anything else says ``0+unknown`` rather than guess.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "siesta-runtime"
UNKNOWN = "0+unknown"
"""A PEP 440 version that sorts below every release: neither installed nor a checkout."""


def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return source_tree_version(Path(__file__).resolve().parents[2], DISTRIBUTION)


def source_tree_version(root: Path, distribution: str) -> str:
    """``version`` of ``root/pyproject.toml`` if it is ``distribution``'s, else unknown."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return UNKNOWN
    if project.get("name") != distribution:
        return UNKNOWN
    return str(project.get("version", UNKNOWN))
