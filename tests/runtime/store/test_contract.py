"""The store contract, concern by concern; SQLite and Redis must pass it unchanged."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from runtime.core.records import (
    E2bSandbox,
    FileKind,
    FileRecord,
    PoolMember,
    SessionRecord,
    SessionStatus,
)
from runtime.seams.stores import Stores
from runtime.store.sqlite import open_sqlite
from tests.runtime.store.conftest import Subject


def record(
    org: str = "o", conversation: str = "c", session_id: str = "s1", fence: int = 1
) -> SessionRecord:
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
        user="u",
        fence=fence,
    )


def test_put_then_get_round_trips(store: Stores) -> None:
    assert store.sessions.put_session(record())
    assert store.sessions.get_session("o", "c") == record()
    assert store.sessions.get_session("o", "other") is None


def test_sessions_are_keyed_by_org_and_conversation(store: Stores) -> None:
    store.sessions.put_session(record(org="a", session_id="s1"))
    store.sessions.put_session(record(org="b", session_id="s2"))
    store.sessions.put_session(record(org="a:b", conversation="c", session_id="s3"))
    a, b = store.sessions.get_session("a", "c"), store.sessions.get_session("b", "c")
    assert a is not None and b is not None
    assert (a.session_id, b.session_id) == ("s1", "s2")
    store.sessions.delete_session("b", "c", fence=1)
    assert store.sessions.get_session("a", "c") == a
    assert [r.session_id for r in store.sessions.list_sessions()] == ["s1", "s3"]


def test_put_replaces_the_conversations_session(store: Stores) -> None:
    store.sessions.put_session(record(session_id="s1"))
    store.sessions.put_session(replace(record(session_id="s2", fence=2), generation=2))
    current = store.sessions.get_session("o", "c")
    assert current is not None and (current.session_id, current.generation) == ("s2", 2)
    assert len(store.sessions.list_sessions()) == 1


def test_writes_with_a_stale_fence_are_refused(store: Stores) -> None:
    store.sessions.put_session(record(session_id="new", fence=7))
    assert store.sessions.put_session(record(session_id="stale", fence=6)) is False
    assert store.sessions.touch_session("o", "c", "new", 500.0, fence=6) is False
    assert store.sessions.delete_session("o", "c", fence=6) is None
    current = store.sessions.get_session("o", "c")
    assert current is not None and (current.session_id, current.last_used_at) == ("new", 100.5)
    assert store.sessions.put_session(record(session_id="newer", fence=8)) is True


def test_touch_only_updates_the_named_session(store: Stores) -> None:
    store.sessions.put_session(record(session_id="s1"))
    assert store.sessions.touch_session("o", "c", "s1", 200.0, fence=2) is True
    assert store.sessions.touch_session("o", "c", "stale", 300.0, fence=2) is False
    current = store.sessions.get_session("o", "c")
    assert current is not None and (current.last_used_at, current.fence) == (200.0, 2)


def test_delete_returns_what_it_removed(store: Stores) -> None:
    store.sessions.put_session(record())
    assert store.sessions.delete_session("o", "c", fence=1) == record()
    assert store.sessions.delete_session("o", "c", fence=1) is None
    assert store.sessions.list_sessions() == []


def test_state_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "siesta.db"
    first = open_sqlite(path)
    first.sessions.put_session(record())
    first.close()
    second = open_sqlite(path)
    assert second.sessions.get_session("o", "c") == record()
    second.close()


# -- leases ----------------------------------------------------------------------------


def test_a_lease_has_one_holder_and_growing_fences(store: Stores) -> None:
    first = store.leases.acquire_lease("o/c", "owner-a", 10)
    assert first is not None
    assert store.leases.acquire_lease("o/c", "owner-b", 10) is None
    assert store.leases.lease_owner("o/c") == "owner-a"
    other = store.leases.acquire_lease("o/d", "owner-c", 10)
    assert other is not None and other > first
    assert store.leases.release_lease("o/c", "owner-b") is False  # compare-and-delete
    assert store.leases.release_lease("o/c", "owner-a") is True
    again = store.leases.acquire_lease("o/c", "owner-b", 10)
    assert again is not None and again > other


def test_renew_is_compare_and_extend(subject: Subject) -> None:
    store = subject.store
    # Seconds, not tenths: on Redis the clock is real, and a loaded machine (the suite
    # runs in several processes) can take a tenth between two calls.
    store.leases.acquire_lease("o/c", "owner-a", 2)
    assert store.leases.renew_lease("o/c", "owner-b", 10) is False
    subject.advance(1.2)
    assert store.leases.renew_lease("o/c", "owner-a", 2) is True
    subject.advance(1.2)  # past the first TTL, inside the renewed one (0.8 s to spare)
    assert store.leases.lease_owner("o/c") == "owner-a"


def test_a_frozen_holder_loses_to_a_newer_one_and_cannot_overwrite(subject: Subject) -> None:
    store = subject.store
    stale_fence = store.leases.acquire_lease("o/c", "frozen", 0.2)
    assert stale_fence is not None
    subject.advance(0.3)  # the holder is frozen past its TTL (GC pause, partition)
    fresh_fence = store.leases.acquire_lease("o/c", "fresh", 10)
    assert fresh_fence is not None and fresh_fence > stale_fence
    assert store.sessions.put_session(record(session_id="fresh", fence=fresh_fence))

    # The frozen holder wakes up and carries on as if nothing happened.
    assert store.leases.renew_lease("o/c", "frozen", 10) is False
    assert store.sessions.put_session(record(session_id="frozen", fence=stale_fence)) is False
    assert store.leases.release_lease("o/c", "frozen") is False
    current = store.sessions.get_session("o", "c")
    assert current is not None and current.session_id == "fresh"
    assert store.leases.lease_owner("o/c") == "fresh"


def test_a_waiter_is_woken_by_the_release(store: Stores) -> None:
    store.leases.acquire_lease("o/c", "holder", 30)
    woken = threading.Event()

    def wait() -> None:
        store.leases.wait_for_release("o/c", 20)
        woken.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    assert not woken.is_set()
    store.leases.release_lease("o/c", "holder")
    waiter.join(timeout=5)
    assert woken.is_set()  # long before the 20 s timeout or the 30 s TTL


# -- capacity slots ----------------------------------------------------------------------


def test_slots_are_claimed_in_every_scope_or_none(store: Stores) -> None:
    scopes = [("org:o", 2), ("user:o/u", 1), ("host:h", 10)]
    assert store.capacity.claim_slot("o/c1", scopes) is None
    assert store.capacity.claim_slot("o/c1", scopes) is None  # counted already: no new room used
    assert store.capacity.claim_slot("o/c2", scopes) == 1  # the user scope is full
    assert store.capacity.slot_members("org:o") == ["o/c1"]  # and o/c2 was counted nowhere
    assert store.capacity.slot_members("host:h") == ["o/c1"]
    store.capacity.release_slot("o/c1", ["org:o", "user:o/u", "host:h"])
    assert store.capacity.claim_slot("o/c2", scopes) is None
    assert store.capacity.slot_members("user:o/u") == ["o/c2"]


def test_concurrent_claims_never_exceed_a_limit(store: Stores) -> None:
    results: list[int | None] = []
    lock = threading.Lock()

    def claim(index: int) -> None:
        outcome = store.capacity.claim_slot(f"o/c{index}", [("org:o", 5)])
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 5
    assert len(store.capacity.slot_members("org:o")) == 5


# -- files -------------------------------------------------------------------------------


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


def test_files_are_listed_oldest_first_per_conversation(store: Stores) -> None:
    store.files.add_file(file_record("f2", at=2.0))
    store.files.add_file(file_record("f1", at=1.0))
    store.files.add_file(file_record("g1", conversation="other"))
    assert [f.file_id for f in store.files.list_files("o", "c")] == ["f1", "f2"]
    assert store.files.get_file("o", "c", "f2") == file_record("f2", at=2.0)


def test_a_file_id_of_another_org_or_conversation_finds_nothing(store: Stores) -> None:
    store.files.add_file(file_record("f1", org="a"))
    assert store.files.get_file("b", "c", "f1") is None
    assert store.files.get_file("a", "other", "f1") is None
    assert store.files.list_files("b", "c") == []


def test_delete_files_returns_what_it_removed(store: Stores) -> None:
    store.files.add_file(file_record("f1"))
    store.files.add_file(file_record("g1", conversation="other"))
    assert [f.file_id for f in store.files.delete_files("o", "c")] == ["f1"]
    assert store.files.list_files("o", "c") == []
    assert [f.file_id for f in store.files.list_files("o", "other")] == ["g1"]


def test_replacing_a_files_content_updates_only_that_file(store: Stores) -> None:
    store.files.add_file(replace(file_record("f1"), editable=True))
    store.files.add_file(file_record("f2"))
    changed = replace(file_record("f1"), size=99, sha256="cd" * 32, editable=True)
    assert store.files.replace_file(changed) is True
    assert store.files.get_file("o", "c", "f1") == changed
    assert store.files.get_file("o", "c", "f2") == file_record("f2")
    assert store.files.replace_file(replace(changed, conversation="other")) is False


def test_the_first_deployment_id_claimed_stays(store: Stores) -> None:
    results: list[str] = []
    claimers = [
        threading.Thread(
            target=lambda i=i: results.append(store.deployment.claim_deployment_id(f"d{i}"))
        )
        for i in range(8)
    ]
    for claimer in claimers:
        claimer.start()
    for claimer in claimers:
        claimer.join()
    assert len(set(results)) == 1  # concurrent first starts agree on one id
    assert store.deployment.claim_deployment_id("later") == results[0]


# -- the warm pool ---------------------------------------------------------------------


def test_pool_arrivals_are_kept_per_image_for_the_window(store: Stores) -> None:
    pool = store.pool
    for at in (100.0, 101.5, 103.0):
        pool.note_pool_arrival("py", at, forget_before=at - 10)
    pool.note_pool_arrival("node", 102.0, forget_before=92.0)
    assert pool.pool_arrivals("py", since=101.0) == [101.5, 103.0]
    assert pool.pool_arrivals("node", since=0.0) == [102.0]
    pool.note_pool_arrival("py", 112.0, forget_before=102.0)  # 100 and 101.5 are forgotten
    assert pool.pool_arrivals("py", since=0.0) == [103.0, 112.0]
    assert pool.pool_arrivals("go", since=0.0) == []


def test_pool_members_are_claimed_oldest_first_by_image(store: Stores) -> None:
    pool = store.pool
    for i, image in enumerate(["py", "base", "py"]):
        pool.add_pool_member(PoolMember(image, f"siesta-{i}", f"s{i}", 100.0 + i))
    assert [m.sandbox_id for m in pool.pool_members()] == ["siesta-0", "siesta-1", "siesta-2"]
    assert pool.claim_pool_member("py") == PoolMember("py", "siesta-0", "s0", 100.0)
    assert pool.claim_pool_member("py") == PoolMember("py", "siesta-2", "s2", 102.0)
    assert pool.claim_pool_member("py") is None
    assert pool.remove_pool_member("siesta-1") is True
    assert pool.remove_pool_member("siesta-1") is False
    assert pool.pool_members() == []


def test_concurrent_claimers_never_get_the_same_member(store: Stores) -> None:
    for i in range(20):
        store.pool.add_pool_member(PoolMember("img", f"siesta-{i}", f"s{i}", float(i)))
    claimed: list[str] = []

    def claim_all() -> None:
        while (member := store.pool.claim_pool_member("img")) is not None:
            claimed.append(member.sandbox_id)

    claimers = [threading.Thread(target=claim_all) for _ in range(6)]
    for claimer in claimers:
        claimer.start()
    for claimer in claimers:
        claimer.join()
    assert sorted(claimed) == sorted(f"siesta-{i}" for i in range(20))


def e2b_sandbox(org: str, sandbox_id: str, started: float, end: float) -> E2bSandbox:
    return E2bSandbox(
        org=org,
        sandbox_id=sandbox_id,
        owner="backend",
        template="base",
        access_token="secret",
        started_at=started,
        end_at=end,
        metadata={"user": "a b"},
        env_vars={"A": "1"},
    )


def test_e2b_sandboxes_are_kept_by_org_and_found_when_their_time_is_up(store: Stores) -> None:
    e2b = store.e2b
    first, second = e2b_sandbox("org-a", "s1", 1.0, 100.0), e2b_sandbox("org-a", "s2", 2.0, 50.0)
    other = e2b_sandbox("org-b", "s9", 3.0, 10.0)
    for sandbox in (second, first, other):
        e2b.put_e2b(sandbox)
    assert e2b.get_e2b("org-a", "s1") == first
    assert e2b.get_e2b("org-b", "s2") is None  # another org's id names nothing
    assert e2b.find_e2b("s2") == second
    assert e2b.find_e2b("s3") is None
    assert [s.sandbox_id for s in e2b.list_e2b("org-a")] == ["s1", "s2"]
    assert e2b.due_e2b(60.0) == [other, second]

    e2b.put_e2b(replace(second, end_at=200.0, state="paused"))
    assert e2b.due_e2b(60.0) == [other]
    assert e2b.get_e2b("org-a", "s2") == replace(second, end_at=200.0, state="paused")

    assert e2b.delete_e2b("org-a", "s9") is False  # the id, but in another org
    assert e2b.find_e2b("s9") == other
    assert e2b.delete_e2b("org-b", "s9") is True
    assert e2b.delete_e2b("org-b", "s9") is False
    assert e2b.find_e2b("s9") is None
    assert e2b.find_e2b("s1") == first
    assert e2b.due_e2b(1000.0) == [first, replace(second, end_at=200.0, state="paused")]
