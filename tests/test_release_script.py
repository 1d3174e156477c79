"""``scripts/release.sh`` against a throwaway git repository: a dry run checks
everything and tags nothing; a real run tags vVERSION with its changelog section;
a dirty tree, a version the pyprojects do not say, a missing changelog section or
an existing tag each stop it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "release.sh"
CHANGELOG = """# Changelog

## [Unreleased]

## [1.2.0] - 2026-12-06

### Added
- Something new.

## [1.1.0] - 2026-11-01

### Fixed
- Something old.
"""
IDENTITY = {
    "GIT_AUTHOR_NAME": "release test",
    "GIT_AUTHOR_EMAIL": "release@test.invalid",
    "GIT_COMMITTER_NAME": "release test",
    "GIT_COMMITTER_EMAIL": "release@test.invalid",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **IDENTITY},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def release(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=repo,
        env={**os.environ, **IDENTITY},
        capture_output=True,
        text=True,
        check=False,
    )


def pyproject(name: str, version: str) -> str:
    return f'[project]\nname = "{name}"\nversion = "{version}"\n'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose HEAD is ready to be released as 1.2.0."""
    (tmp_path / "clients" / "python").mkdir(parents=True)
    (tmp_path / "CHANGELOG.md").write_text(CHANGELOG)
    (tmp_path / "pyproject.toml").write_text(pyproject("siesta-runtime", "1.2.0"))
    (tmp_path / "clients/python/pyproject.toml").write_text(pyproject("siesta-client", "1.2.0"))
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "Release 1.2.0")
    return tmp_path


def test_a_dry_run_checks_everything_and_tags_nothing(repo: Path) -> None:
    done = release(repo, "1.2.0", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would tag v1.2.0" in done.stdout
    assert "Something new." in done.stdout
    assert "Something old." not in done.stdout  # only this release's section
    assert git(repo, "tag", "--list") == ""


def test_a_release_tags_head_with_its_changelog_section(repo: Path) -> None:
    done = release(repo, "1.2.0")
    assert done.returncode == 0, done.stderr
    assert git(repo, "rev-list", "-n", "1", "v1.2.0") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "cat-file", "-t", "v1.2.0").strip() == "tag"  # annotated
    message = git(repo, "tag", "--list", "--format=%(contents)", "v1.2.0")
    assert message.startswith("Siesta Runtime 1.2.0\n")
    assert "Something new." in message
    assert "Something old." not in message

    again = release(repo, "1.2.0", "--dry-run")
    assert again.returncode == 1
    assert "tag v1.2.0 exists already" in again.stderr


def test_a_dirty_tree_is_refused(repo: Path) -> None:
    (repo / "CHANGELOG.md").write_text(CHANGELOG + "\nuncommitted\n")
    done = release(repo, "1.2.0", "--dry-run")
    assert done.returncode == 1
    assert "not clean" in done.stderr


def test_a_version_the_pyprojects_do_not_say_is_refused(repo: Path) -> None:
    (repo / "clients/python/pyproject.toml").write_text(pyproject("siesta-client", "1.1.0"))
    git(repo, "commit", "-q", "-am", "the client left behind")
    done = release(repo, "1.2.0", "--dry-run")
    assert done.returncode == 1
    assert "clients/python/pyproject.toml says version 1.1.0, not 1.2.0" in done.stderr


def test_a_version_without_its_changelog_section_is_refused(repo: Path) -> None:
    for path in ("pyproject.toml", "clients/python/pyproject.toml"):
        name = "siesta-client" if path.startswith("clients") else "siesta-runtime"
        (repo / path).write_text(pyproject(name, "1.3.0"))
    git(repo, "commit", "-q", "-am", "1.3.0, the changelog forgotten")
    done = release(repo, "1.3.0", "--dry-run")
    assert done.returncode == 1
    assert "CHANGELOG.md has no '## [1.3.0] - YYYY-MM-DD' section" in done.stderr


def test_a_malformed_version_is_refused(repo: Path) -> None:
    done = release(repo, "v1.2", "--dry-run")
    assert done.returncode == 1
    assert "VERSION must look like 1.2.3" in done.stderr
