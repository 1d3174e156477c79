"""Spreadsheet conversion rules of the JS helpers."""

from __future__ import annotations

import datetime
import io

import pytest
from openpyxl import Workbook, load_workbook

from runtime.jsexec import excel


def book(rows: list[list[object]]) -> bytes:
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "S"
    for row in rows:
        sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def test_cells_come_back_as_json_friendly_values() -> None:
    data = book(
        [
            ["n", "x", "when", None],
            [1, 2.5, datetime.date(2026, 1, 2), "a"],
            [None, None, None, None],
            [3, 4, datetime.datetime(2026, 1, 2, 3, 4, 5), None],
        ]
    )
    rows = excel.read_rows(excel.open_workbook(data, "b.xlsx"), "b.xlsx", "S", 100)
    assert rows == [
        {"n": 1, "x": 2.5, "when": "2026-01-02", "column4": "a"},
        {"n": 3, "x": 4, "when": "2026-01-02T03:04:05", "column4": None},
    ]
    assert isinstance(rows[0]["n"], int)


def test_written_text_is_never_a_formula() -> None:
    data = excel.write_rows("S", [{"a": "=1+1", "b": "123", "c": 7, "d": None}])
    sheet = load_workbook(io.BytesIO(data))["S"]
    assert [list(r) for r in sheet.iter_rows(values_only=True)] == [
        ["a", "b", "c", "d"],
        ["=1+1", "123", 7, None],
    ]
    assert sheet["A2"].data_type == "s"


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(excel.ExcelError, match="not a readable spreadsheet"):
        excel.open_workbook(b"not a workbook", "x.xlsx")
    with pytest.raises(excel.ExcelError, match="all objects"):
        excel.write_rows("S", [{"a": 1}, [1]])
    workbook = excel.open_workbook(book([["a"], [1]]), "b.xlsx")
    with pytest.raises(excel.ExcelError, match="has no sheet 'T' \\(sheets: S\\)"):
        excel.read_rows(workbook, "b.xlsx", "T", 10)


def test_stats_count_only_numbers() -> None:
    rows: list[excel.Row] = [{"v": 1}, {"v": "2"}, {"v": True}, {"v": 3.5}, {"v": None}]
    assert excel.stats(rows, "f", "v") == {
        "min": 1,
        "max": 3.5,
        "sum": 4.5,
        "average": 2.25,
        "count": 2,
    }


SEARCH_BOOK: list[list[object]] = [
    ["name", "qty", "when", "flag"],
    [" alice ", 3, datetime.date(2026, 1, 31), True],
    ["ALICE", 4.5, datetime.datetime(2026, 1, 31, 8, 30), False],
    ["Alicia", "3", None, None],
    ["Straße", 30, None, None],
    [None, None, None, None],
    ["bob", None, None, None],
]


def search_rows() -> list[excel.Row]:
    return excel.read_rows(excel.open_workbook(book(SEARCH_BOOK), "s.xlsx"), "s.xlsx", "S", 100)


@pytest.mark.parametrize(
    ("column", "value", "match", "expected"),
    [
        # Equality after case folding and trimming, on both sides.
        ("name", "Alice", "equals", [" alice ", "ALICE"]),
        ("name", "  aLiCe\t", "equals", [" alice ", "ALICE"]),
        ("name", "Ali", "equals", []),
        ("name", "alice x", "equals", []),
        ("name", "STRASSE", "equals", ["Straße"]),  # casefold, not lower
        ("name", "", "equals", []),  # empty cells are not matched
        # Numbers and dates compare by their text, as readExcelFile returns them.
        ("qty", 3, "equals", [" alice ", "Alicia"]),
        ("qty", "3", "equals", [" alice ", "Alicia"]),
        ("qty", 3.0, "equals", [" alice ", "Alicia"]),
        ("qty", 4.5, "equals", ["ALICE"]),
        ("qty", 30, "equals", ["Straße"]),
        ("when", "2026-01-31", "equals", [" alice "]),
        ("when", "2026-01-31T08:30:00", "equals", ["ALICE"]),
        ("flag", True, "equals", [" alice "]),
        ("flag", "FALSE", "equals", ["ALICE"]),
        # Substring only when asked for.
        ("name", "Ali", "contains", [" alice ", "ALICE", "Alicia"]),
        ("qty", 3, "contains", [" alice ", "Alicia", "Straße"]),
        ("when", "2026-01", "contains", [" alice ", "ALICE"]),
        ("name", "zed", "contains", []),
    ],
)
def test_search_matches_equal_text_ignoring_case_and_spaces(
    column: str, value: object, match: excel.Match, expected: list[str]
) -> None:
    found = excel.search(search_rows(), "s.xlsx", column, value, match)
    assert [row["name"] for row in found] == expected


def test_search_by_default_is_equality() -> None:
    assert excel.search(search_rows(), "s.xlsx", "name", "Ali") == []


def test_search_of_a_missing_column_names_the_columns() -> None:
    with pytest.raises(excel.ExcelError, match="has no column 'nom' \\(columns: name, qty"):
        excel.search(search_rows(), "s.xlsx", "nom", "x")
