"""The staging count (``FileStore.count_staged``), on SQLite and Redis alike."""

from __future__ import annotations

import pytest

from runtime.core.records import StagingCount
from runtime.seams.stores import Stores


def count(
    store: Stores,
    items: dict[str, int],
    *,
    limit: int = 100,
    session: str = "s1",
    org: str = "o",
    conversation: str = "c",
) -> StagingCount:
    return store.files.count_staged(org, conversation, session, items, limit)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ({"a": 60}, {"b": 40}, StagingCount(True, 100, 40)),  # exactly the limit
        ({"a": 60}, {"b": 41}, StagingCount(False, 60, 41)),
        ({"a": 60}, {"a": 60}, StagingCount(True, 60, 0)),  # counted once
        ({"a": 60}, {"a": 60, "b": 40}, StagingCount(True, 100, 40)),
        ({"a": 60}, {"b": 30, "c": 30}, StagingCount(False, 60, 60)),  # all or nothing
        ({}, {"a": 101}, StagingCount(False, 0, 101)),
    ],
)
def test_count_staged_adds_new_items_up_to_the_limit(
    store: Stores, first: dict[str, int], second: dict[str, int], expected: StagingCount
) -> None:
    count(store, first)
    assert count(store, second) == expected


def test_a_refused_count_counts_nothing(store: Stores) -> None:
    assert not count(store, {"a": 30, "b": 80}).accepted
    assert count(store, {"a": 30}) == StagingCount(True, 30, 30)


def test_another_session_starts_from_zero(store: Stores) -> None:
    count(store, {"a": 90})
    assert count(store, {"b": 90}, session="s2") == StagingCount(True, 90, 90)
    assert count(store, {"a": 90}, session="s2") == StagingCount(False, 90, 90)


def test_counts_are_per_org_and_conversation(store: Stores) -> None:
    count(store, {"a": 90})
    for org, conversation in (("o", "other"), ("other", "c"), ("o/c", "c")):
        got = count(store, {"a": 90}, org=org, conversation=conversation)
        assert got == StagingCount(True, 90, 90)


def test_deleting_the_conversations_files_drops_its_count(store: Stores) -> None:
    count(store, {"a": 90})
    count(store, {"a": 90}, conversation="keep")
    store.files.delete_files("o", "c")
    assert count(store, {"b": 90}) == StagingCount(True, 90, 90)
    assert count(store, {"b": 90}, conversation="keep") == StagingCount(False, 90, 90)
