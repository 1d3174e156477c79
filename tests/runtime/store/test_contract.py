"""The Store contract; every implementation must pass it unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from runtime.store.base import FileKind, FileRecord, SessionRecord, SessionStatus, Store
from runtime.store.sqlite import SqliteStore


@pytest.fixture(params=["sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    implementation = SqliteStore(tmp_path / "state" / "siesta.db")
    yield implementation
    implementation.close()


def record(org: str = "o", conversation: str = "c", session_id: str = "s1") -> SessionRecord:
    return SessionRecord(
        org=org,
        conversation=conversation,
        session_id=session_id,
        sandbox_id=f"siesta-{session_id}",
        image_id="debian-base",
        image_ref="img:1",
        status=SessionStatus.ACTIVE,
        created_at=100.5,
        last_used_at=100.5,
        generation=1,
    )


def test_put_then_get_round_trips(store: Store) -> None:
    store.put_session(record())
    assert store.get_session("o", "c") == record()
    assert store.get_session("o", "other") is None


def test_sessions_are_keyed_by_org_and_conversation(store: Store) -> None:
    store.put_session(record(org="a", session_id="s1"))
    store.put_session(record(org="b", session_id="s2"))
    a, b = store.get_session("a", "c"), store.get_session("b", "c")
    assert a is not None and b is not None
    assert (a.session_id, b.session_id) == ("s1", "s2")
    store.delete_session("b", "c")
    assert store.get_session("a", "c") == a


def test_put_replaces_the_conversations_session(store: Store) -> None:
    store.put_session(record(session_id="s1"))
    store.put_session(replace(record(session_id="s2"), generation=2))
    current = store.get_session("o", "c")
    assert current is not None and (current.session_id, current.generation) == ("s2", 2)
    assert len(store.list_sessions()) == 1


def test_touch_only_updates_the_named_session(store: Store) -> None:
    store.put_session(record(session_id="s1"))
    assert store.touch_session("o", "c", "s1", 200.0) is True
    assert store.touch_session("o", "c", "stale", 300.0) is False
    current = store.get_session("o", "c")
    assert current is not None and current.last_used_at == 200.0


def test_delete_returns_what_it_removed(store: Store) -> None:
    store.put_session(record())
    assert store.delete_session("o", "c") == record()
    assert store.delete_session("o", "c") is None
    assert store.list_sessions() == []


def test_state_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "siesta.db"
    first = SqliteStore(path)
    first.put_session(record())
    first.close()
    second = SqliteStore(path)
    assert second.get_session("o", "c") == record()
    second.close()


def file_record(
    file_id: str, org: str = "o", conversation: str = "c", at: float = 1.0
) -> FileRecord:
    return FileRecord(
        org=org,
        conversation=conversation,
        file_id=file_id,
        name=f"{file_id}.csv",
        size=3,
        content_type="text/csv",
        sha256="ab" * 32,
        kind=FileKind.ATTACHMENT,
        created_at=at,
    )


def test_files_are_listed_oldest_first_per_conversation(store: Store) -> None:
    store.add_file(file_record("f2", at=2.0))
    store.add_file(file_record("f1", at=1.0))
    store.add_file(file_record("g1", conversation="other"))
    assert [f.file_id for f in store.list_files("o", "c")] == ["f1", "f2"]
    assert store.get_file("o", "c", "f2") == file_record("f2", at=2.0)


def test_a_file_id_of_another_org_or_conversation_finds_nothing(store: Store) -> None:
    store.add_file(file_record("f1", org="a"))
    assert store.get_file("b", "c", "f1") is None
    assert store.get_file("a", "other", "f1") is None
    assert store.list_files("b", "c") == []


def test_delete_files_returns_what_it_removed(store: Store) -> None:
    store.add_file(file_record("f1"))
    store.add_file(file_record("g1", conversation="other"))
    assert [f.file_id for f in store.delete_files("o", "c")] == ["f1"]
    assert store.list_files("o", "c") == []
    assert [f.file_id for f in store.list_files("o", "other")] == ["g1"]
