"""Memory banks on both backends: per org, entries per key in the order added, the
limits checked as they are added, and a bank's entries gone with it."""

from __future__ import annotations

from dataclasses import replace

from runtime.core.records import MemoryBank, MemoryEntry
from runtime.seams.stores import Stores

BANK = MemoryBank("org-a", "mem1", "Facts", "what users told us", "general", "read_write", 10.0)


def entry(n: int, key: str = "user-1", bank: str = "mem1", org: str = "org-a") -> MemoryEntry:
    vector = bytes(range(8)) if n % 2 else b""
    return MemoryEntry(org, bank, key, f"e{n}", f"fact {n}", None, 100.0 + n, "m", vector)


def test_banks_are_kept_per_org_with_the_org_limit_checked_as_they_are_added(
    store: Stores,
) -> None:
    second = replace(BANK, bank_id="mem2", created_at=20.0, type="conversation")
    assert store.memory.add_bank(second, limit=2)
    assert store.memory.add_bank(BANK, limit=2)
    assert not store.memory.add_bank(replace(BANK, bank_id="mem3"), limit=2)
    assert store.memory.add_bank(replace(BANK, org="org-b"), limit=1)

    assert store.memory.list_banks("org-a") == [BANK, second]  # oldest first
    assert store.memory.get_bank("org-a", "mem2") == second
    assert store.memory.get_bank("org-c", "mem2") is None
    assert not store.memory.delete_bank("org-c", "mem1")  # another org's
    assert store.memory.delete_bank("org-a", "mem1")
    assert not store.memory.delete_bank("org-a", "mem1")
    assert store.memory.get_bank("org-b", "mem1") is not None  # the same id, another org


def test_entries_come_back_from_either_end_in_the_order_added(store: Stores) -> None:
    store.memory.add_bank(BANK, limit=5)
    assert [store.memory.add_entry(entry(n), limit=10) for n in range(4)] == [1, 2, 3, 4]
    store.memory.add_entry(entry(9, key="user-2"), limit=10)

    newest, total = store.memory.entries("org-a", "mem1", "user-1", newest_first=True, limit=3)
    assert [e.entry_id for e in newest] == ["e3", "e2", "e1"]
    assert total == 4
    oldest, _ = store.memory.entries("org-a", "mem1", "user-1", newest_first=False, limit=2)
    assert oldest == [entry(0), entry(1)]  # content, vector and all, as written
    assert store.memory.entries("org-a", "mem1", "nobody", newest_first=True, limit=5) == ([], 0)
    assert store.memory.entries("org-b", "mem1", "user-1", newest_first=True, limit=5) == ([], 0)


def test_a_full_key_and_a_missing_bank_refuse_the_entry(store: Stores) -> None:
    store.memory.add_bank(BANK, limit=5)
    assert store.memory.add_entry(entry(0), limit=2) == 1
    assert store.memory.add_entry(entry(1), limit=2) == 2
    assert store.memory.add_entry(entry(2), limit=2) == 0  # full: not added
    assert store.memory.add_entry(entry(3, key="user-2"), limit=2) == 1  # per key
    assert store.memory.add_entry(entry(4, bank="gone"), limit=2) is None
    assert store.memory.add_entry(entry(5, org="org-b"), limit=2) is None  # not its bank


def test_deleting_a_bank_deletes_its_entries(store: Stores) -> None:
    store.memory.add_bank(BANK, limit=5)
    store.memory.add_entry(entry(0), limit=5)
    store.memory.add_entry(entry(1, key="user-2"), limit=5)
    assert store.memory.delete_bank("org-a", "mem1")
    assert store.memory.add_bank(BANK, limit=5)  # the same id again: empty
    assert store.memory.entries("org-a", "mem1", "user-1", newest_first=True, limit=5) == ([], 0)
    assert store.memory.entries("org-a", "mem1", "user-2", newest_first=True, limit=5) == ([], 0)
