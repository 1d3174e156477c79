from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from siesta_contract.text import WORKSPACE_FILE_PATH, WORKSPACE_PATH

from runtime.core.errors import InvalidPath, PathOutsideWorkspace
from runtime.sandbox.paths import sanitize_file_name, unique_names, workspace_path

LIMIT = 1024


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("a.txt", "a.txt"),
        ("./a/b/../c.txt", "a/c.txt"),
        ("a//b/", "a/b"),
        ("/mnt/work/in/sales.csv", "in/sales.csv"),
        ("/mnt/work/./x/../y", "y"),
        ("a/..", "."),
    ],
)
def test_paths_inside_the_workspace(path: str, relative: str) -> None:
    assert workspace_path(path, max_bytes=LIMIT, allow_root=True) == relative


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/",
        "/mnt",
        "/mnt/workx/a",
        "/mnt/work/../etc",
        "..",
        "../x",
        "a/../../x",
        "./../../..",
    ],
)
def test_paths_leaving_the_workspace(path: str) -> None:
    with pytest.raises(PathOutsideWorkspace):
        workspace_path(path, max_bytes=LIMIT)


@pytest.mark.parametrize("path", ["", "  ", "a\x00b", "x" * 1025, "a/" + "n" * 256, "."])
def test_invalid_paths(path: str) -> None:
    with pytest.raises(InvalidPath):
        workspace_path(path, max_bytes=LIMIT)


def test_the_workspace_itself_only_where_allowed() -> None:
    assert workspace_path(".", max_bytes=LIMIT, allow_root=True) == "."
    assert workspace_path("/mnt/work", max_bytes=LIMIT, allow_root=True) == "."


@given(st.text(max_size=300))
def test_no_accepted_path_leaves_the_workspace(path: str) -> None:
    try:
        relative = workspace_path(path, max_bytes=LIMIT, allow_root=True)
    except (InvalidPath, PathOutsideWorkspace):
        return
    parts = relative.split("/")
    assert not relative.startswith("/")
    assert ".." not in parts
    assert "\x00" not in relative


@pytest.mark.parametrize(
    ("name", "clean"),
    [
        ("sales.csv", "sales.csv"),
        ("my data (1).csv", "my_data__1_.csv"),
        ("..hidden", "hidden"),
        ("a...b..c", "a.b.c"),
        ("ünïcödé.txt", "_n_c_d_.txt"),
        ("...", "file"),
        ("", "file"),
        ("../../etc/passwd", "_._etc_passwd"),
    ],
)
def test_sanitize(name: str, clean: str) -> None:
    assert sanitize_file_name(name) == clean


@given(st.text(max_size=300))
def test_sanitized_names_are_safe(name: str) -> None:
    clean = sanitize_file_name(name)
    assert clean and not clean.startswith(".")
    assert ".." not in clean
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in clean)
    assert len(clean) <= 255


def test_collisions_are_numbered_before_the_extension() -> None:
    assert unique_names(["a.csv", "a.csv", "a csv", "a_csv", "b", "b"]) == [
        "a.csv",
        "a-2.csv",
        "a_csv",
        "a_csv-2",
        "b",
        "b-2",
    ]


PIECES = st.sampled_from([".", "..", "...", "/", "a", " ", "\u3000", "/mnt/work", "mnt", "\x00"])


@given(st.lists(PIECES, max_size=8).map("".join))
def test_the_schemas_path_patterns_say_what_the_code_takes(path: str) -> None:
    """What the OpenAPI document's patterns refuse, the code refuses; what they allow,
    the code takes, unless a ``..`` after a name climbs out or lands on the workspace
    (counting, which no regular expression does: docs/concepts/api.md says so)."""
    for pattern, allow_root in ((WORKSPACE_PATH, True), (WORKSPACE_FILE_PATH, False)):
        allowed = re.fullmatch(pattern, path) is not None
        try:
            workspace_path(path, max_bytes=LIMIT, allow_root=allow_root)
        except (InvalidPath, PathOutsideWorkspace):
            assert not allowed or "/.." in path, (pattern, path)
        else:
            assert allowed, (pattern, path)
