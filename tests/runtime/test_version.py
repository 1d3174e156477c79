"""One version, written once in ``pyproject.toml``: the service, its CLI, its OpenAPI
document and its MCP server all report it; a checkout never installed reads it from
the file, and anything else says it does not know."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cli.main import main
from runtime.core.version import UNKNOWN, source_tree_version, version
from tests.helpers import REPO


def declared(pyproject: Path) -> str:
    return str(tomllib.loads(pyproject.read_text())["project"]["version"])


def test_the_service_reports_its_pyproject_version() -> None:
    assert version() == declared(REPO / "pyproject.toml")


def test_a_checkout_reads_its_pyproject_and_nothing_else_is_guessed(tmp_path: Path) -> None:
    assert source_tree_version(REPO, "siesta-runtime") == declared(REPO / "pyproject.toml")
    assert source_tree_version(tmp_path, "siesta-runtime") == UNKNOWN  # no file
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "9.9"\n')
    assert source_tree_version(tmp_path, "siesta-runtime") == UNKNOWN  # not ours


def test_the_cli_prints_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"siesta-runtime {version()}\n"
