"""The client's version: one source, ``version`` in ``clients/python/pyproject.toml``.

Installed, the distribution's metadata answers; from a checkout that was never
installed (the tests put ``clients/python`` on the path) the ``pyproject.toml``
beside the package does; anything else says ``0+unknown`` rather than guess.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "siesta-client"
UNKNOWN = "0+unknown"


def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
        project = tomllib.loads(text)["project"]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return UNKNOWN
    if project.get("name") != DISTRIBUTION:
        return UNKNOWN
    return str(project.get("version", UNKNOWN))
