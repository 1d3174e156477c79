"""Snapshot records on both backends: per org, with the org's limit checked as they
are added."""

from __future__ import annotations

from dataclasses import replace

from runtime.core.records import SnapshotRecord
from runtime.seams.stores import Stores

RECORD = SnapshotRecord(
    org="org-a",
    snapshot_id="snapaaaa",
    owner="user-1",
    conversation="conv-1",
    session_id="s1",
    image_id="debian-base",
    image="siesta-snapshot:snapaaaa",
    workspace="/var/lib/siesta/disks/d/snapshots/snapaaaa.img",
    workspace_bytes=10,
    workspace_allocated_bytes=4,
    image_bytes=3,
    created_at=100.0,
    name="before the refactor",
    metadata={"k": "v"},
)


def test_records_are_kept_per_org_and_the_limit_is_checked_as_they_are_added(
    store: Stores,
) -> None:
    second = replace(RECORD, snapshot_id="snapbbbb", created_at=200.0, name=None)
    other_org = replace(RECORD, org="org-b", snapshot_id="snapcccc")
    assert store.snapshots.add_snapshot(second, limit=2)
    assert store.snapshots.add_snapshot(RECORD, limit=2)
    assert not store.snapshots.add_snapshot(replace(RECORD, snapshot_id="snapdddd"), limit=2)
    assert store.snapshots.add_snapshot(other_org, limit=1)

    assert store.snapshots.list_snapshots("org-a") == [RECORD, second]  # oldest first
    assert store.snapshots.get_snapshot("org-a", "snapaaaa") == RECORD
    assert store.snapshots.get_snapshot("org-b", "snapaaaa") is None
    assert store.snapshots.snapshot_ids() == {"snapaaaa", "snapbbbb", "snapcccc"}

    assert store.snapshots.delete_snapshot("org-b", "snapaaaa") is None  # another org's
    assert store.snapshots.delete_snapshot("org-a", "snapaaaa") == RECORD
    assert store.snapshots.delete_snapshot("org-a", "snapaaaa") is None
    assert store.snapshots.snapshot_ids() == {"snapbbbb", "snapcccc"}
    assert store.snapshots.add_snapshot(replace(RECORD, snapshot_id="snapeeee"), limit=2)
