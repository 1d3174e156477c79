"""The image catalog, its builds and the audit trail: the same behaviour on SQLite and
Redis (several instances share the Redis one: what one writes, the next read sees)."""

from __future__ import annotations

import threading

from runtime.core.operator_records import AuditEntry, AuditFilter, ImageBuild
from tests.runtime.store.conftest import Subject


def test_versions_are_added_once_and_replaced_only_as_they_were_read(subject: Subject) -> None:
    catalog = subject.store.catalog
    assert catalog.catalog() == ({}, {})
    assert catalog.add_image("python:1", '{"v": 1}')
    assert not catalog.add_image("python:1", '{"v": "other"}')  # the first one stays
    assert catalog.replace_image("python:1", '{"v": 1}', '{"v": 2}')
    assert not catalog.replace_image("python:1", '{"v": 1}', '{"v": 3}')  # read before: stale
    assert not catalog.replace_image("absent:1", '{"v": 1}', '{"v": 3}')
    assert catalog.catalog()[0] == {"python:1": '{"v": 2}'}


def test_a_compare_and_set_race_has_exactly_one_winner(subject: Subject) -> None:
    catalog = subject.store.catalog
    catalog.add_image("python:1", "old")
    wins: list[bool] = []
    threads = [
        threading.Thread(
            target=lambda i=i: wins.append(catalog.replace_image("python:1", "old", f"new-{i}"))
        )
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_default_tags(subject: Subject) -> None:
    catalog = subject.store.catalog
    assert catalog.set_default_tag("python", "1", only_if_unset=True)
    assert not catalog.set_default_tag("python", "2", only_if_unset=True)
    assert catalog.catalog()[1] == {"python": "1"}
    assert catalog.set_default_tag("python", "2")
    assert catalog.catalog()[1] == {"python": "2"}


def test_builds_newest_first_and_their_log_up_to_its_limit(subject: Subject) -> None:
    catalog = subject.store.catalog
    first = ImageBuild("a" * 32, "python:1", "succeeded", "ops", 10.0, 20.0, "sha256:1")
    second = ImageBuild("b" * 32, "python:1", "running", "ops", 30.0)
    other = ImageBuild("c" * 32, "python:2", "running", "ops", 40.0)
    for build in (first, second, other):
        catalog.put_build(build)
    assert catalog.list_builds("python:1", 10) == [second, first]
    assert catalog.list_builds("python:1", 1) == [second]
    assert catalog.get_build("b" * 32) == second
    assert catalog.get_build("d" * 32) is None
    done = ImageBuild("b" * 32, "python:1", "failed", "ops", 30.0, 31.0, None, "boom")
    catalog.put_build(done)
    assert catalog.get_build("b" * 32) == done
    assert catalog.append_build_log("b" * 32, ["one", "two"], keep=3) == 2
    assert catalog.append_build_log("b" * 32, ["three", "four"], keep=3) == 3  # "four" dropped
    assert catalog.build_log("b" * 32, 0) == ["one", "two", "three"]
    assert catalog.build_log("b" * 32, 2) == ["three"]
    assert catalog.build_log("b" * 32, 5) == []
    assert catalog.build_log("c" * 32, 0) == []


def entry(n: int, at: float, actor: str = "ops", action: str = "image.retire") -> AuditEntry:
    return AuditEntry(f"e{n}", at, actor, action, f"img-{n}:1", "10.0.0.1", "api", {"n": n})


def test_audit_is_listed_newest_first_filtered_paged_and_pruned(subject: Subject) -> None:
    audit = subject.store.audit
    entries = [
        entry(1, 100.0),
        entry(2, 200.0, actor="alice", action="image.build"),
        entry(3, 300.0, action="sandbox.delete"),
        entry(4, 400.0, actor="alice"),
    ]
    for e in entries:
        audit.add_audit(e)
    assert audit.list_audit(AuditFilter()) == entries[::-1]
    assert audit.list_audit(AuditFilter(actor="alice")) == [entries[3], entries[1]]
    assert audit.list_audit(AuditFilter(action="image.")) == [entries[3], entries[1], entries[0]]
    assert audit.list_audit(AuditFilter(action="image")) == []  # exact unless it ends in "."
    assert audit.list_audit(AuditFilter(action="sandbox.delete")) == [entries[2]]
    assert audit.list_audit(AuditFilter(target="img-2:1")) == [entries[1]]
    assert audit.list_audit(AuditFilter(before=300.0, limit=1)) == [entries[1]]
    assert audit.prune_audit(250.0) == 2
    assert audit.list_audit(AuditFilter()) == [entries[3], entries[2]]
