"""The client's version is its own distribution's, written once in its pyproject."""

from __future__ import annotations

import tomllib

import siesta_client
from tests.helpers import REPO


def test_the_client_reports_its_own_pyproject_version() -> None:
    pyproject = tomllib.loads((REPO / "clients/python/pyproject.toml").read_text())
    assert siesta_client.__version__ == pyproject["project"]["version"]
