"""Revoked egress credentials (``RevocationStore``), on SQLite and Redis alike: a log
read on from a position, in the order it was written, kept for a retention."""

from __future__ import annotations

import random
import threading

from runtime.core.records import EgressRevocation
from runtime.seams.stores import Stores

DAY = 86400.0


def revoke(store: Stores, conversation: str, at: float, keep: float = DAY) -> EgressRevocation:
    revocation = EgressRevocation("org-a", conversation, at)
    store.revocations.revoke_egress(revocation, keep)
    return revocation


def read_all(store: Stores, after: str | None = None) -> tuple[list[EgressRevocation], str | None]:
    found, position = [], after
    while True:
        page, position = store.revocations.egress_revocations(position, 2)
        found += page
        if len(page) < 2:
            return found, position


def test_nothing_revoked_reads_nothing(store: Stores) -> None:
    assert store.revocations.egress_revocations(None, 10) == ([], None)


def test_revocations_are_read_in_order_and_on_from_a_position(store: Stores) -> None:
    first = [revoke(store, f"c{i}", 1000.0 + i) for i in range(5)]
    found, position = read_all(store)
    assert found == first
    assert store.revocations.egress_revocations(position, 10) == ([], position)

    later = [revoke(store, "c9", 2000.0), revoke(store, "c0", 2001.0)]  # c0 deleted again
    assert read_all(store, position)[0] == later


def test_a_page_is_at_most_the_limit(store: Stores) -> None:
    made = [revoke(store, f"c{i}", 1000.0 + i) for i in range(3)]
    page, position = store.revocations.egress_revocations(None, 2)
    assert page == made[:2]
    assert store.revocations.egress_revocations(position, 2)[0] == made[2:]


def test_a_revocation_from_a_lagging_clock_still_comes_after_the_position(
    store: Stores,
) -> None:
    revoke(store, "ahead", 5000.0)
    _, position = read_all(store)
    lagging = revoke(store, "behind", 4000.0)  # another instance's clock, a second behind
    assert read_all(store, position)[0] == [lagging]


def test_revocations_older_than_the_retention_go_when_one_is_recorded(store: Stores) -> None:
    revoke(store, "old", 1000.0)
    revoke(store, "kept", 1500.0)
    newest = revoke(store, "new", 2000.0, keep=500.0)
    assert [r.conversation for r in read_all(store)[0]] == ["kept", "new"]
    assert newest.revoked_at == 2000.0


def test_a_reader_polling_while_instances_write_sees_each_revocation_once(
    store: Stores,
) -> None:
    writers, each = 4, 25

    def write(writer: int) -> None:
        for i in range(each):
            revoke(store, f"w{writer}-{i}", 1000.0 + random.random())

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    seen: list[EgressRevocation] = []
    position = None
    while any(thread.is_alive() for thread in threads):
        page, position = store.revocations.egress_revocations(position, 7)
        seen += page
    for thread in threads:
        thread.join()
    seen += read_all(store, position)[0]
    names = [r.conversation for r in seen]
    assert sorted(names) == sorted(f"w{w}-{i}" for w in range(writers) for i in range(each))
