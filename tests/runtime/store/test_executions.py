"""The executions log contract, on SQLite and on Redis."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from siesta_contract.tools import ExecutionStatus

from runtime.core.records import ExecutionFilter, ToolExecution
from runtime.seams.stores import ExecutionStore, Stores
from runtime.store.sqlite import open_sqlite
from runtime.tools.executions import redact


@pytest.fixture
def log(store: Stores) -> ExecutionStore:
    return store.executions


def execution(
    i: int,
    status: ExecutionStatus = ExecutionStatus.SUCCEEDED,
    org: str = "o",
    function: str = "runCommand",
    conversation: str = "c",
) -> ToolExecution:
    return ToolExecution(
        id=f"e{i}",
        org=org,
        conversation=conversation,
        agent_id="a",
        user_id="u",
        function=function,
        source="system:sandbox",
        arguments={"command": "ls"},
        status=status,
        created_at=1000.0 + i,
        pending={"arguments": {"command": "ls"}}
        if status is ExecutionStatus.PENDING_APPROVAL
        else None,
    )


def test_add_get_save(log: ExecutionStore) -> None:
    log.add(execution(1, ExecutionStatus.RUNNING))
    stored = log.get("o", "e1")
    assert stored is not None and stored.status is ExecutionStatus.RUNNING
    stored.status, stored.result = ExecutionStatus.SUCCEEDED, {"exitCode": 0}
    log.save(stored)
    assert log.get("o", "e1") == stored
    assert log.get("other-org", "e1") is None


def test_a_decision_is_taken_once_even_when_raced(log: ExecutionStore) -> None:
    log.add(execution(1, ExecutionStatus.PENDING_APPROVAL))
    winners: list[ToolExecution] = []

    def approve() -> None:
        decided = log.decide(
            "o", "e1", {"decision": "approved", "by": "x"}, ExecutionStatus.RUNNING, 1001.0
        )
        if decided is not None:
            winners.append(decided)

    threads = [threading.Thread(target=approve) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    assert winners[0].approval == {"decision": "approved", "by": "x"}
    assert log.decide("o", "e1", {"decision": "denied"}, ExecutionStatus.DENIED, 1001.0) is None


def test_find_filters_newest_first(log: ExecutionStore) -> None:
    for i in range(5):
        log.add(execution(i, function="readFile" if i % 2 else "runCommand"))
    log.add(execution(9, ExecutionStatus.FAILED, conversation="d"))
    log.add(execution(10, org="other"))
    assert [e.id for e in log.find("o", ExecutionFilter())] == ["e9", "e4", "e3", "e2", "e1", "e0"]
    assert [e.id for e in log.find("o", ExecutionFilter(function="readFile"))] == ["e3", "e1"]
    assert [e.id for e in log.find("o", ExecutionFilter(status=ExecutionStatus.FAILED))] == ["e9"]
    assert [e.id for e in log.find("o", ExecutionFilter(since=1002, until=1003.5))] == ["e3", "e2"]
    assert [e.id for e in log.find("o", ExecutionFilter(conversation="c", limit=2))] == ["e4", "e3"]
    every_org = log.find(None, ExecutionFilter(limit=3))
    assert [(e.org, e.id) for e in every_org] == [("other", "e10"), ("o", "e9"), ("o", "e4")]
    assert [e.id for e in log.find(None, ExecutionFilter(function="readFile"))] == ["e3", "e1"]


def test_redaction_reaches_nested_values() -> None:
    assert redact({"a": 1, "Api-Key": "x", "nested": [{"password": "p", "b": {"token": "t"}}]}) == {
        "a": 1,
        "Api-Key": "[redacted]",
        "nested": [{"password": "[redacted]", "b": {"token": "[redacted]"}}],
    }


def test_a_log_kept_by_an_earlier_version_in_its_own_file_is_imported_once(
    tmp_path: Path,
) -> None:
    legacy = sqlite3.connect(tmp_path / "tool-executions.db")
    legacy.execute(
        "CREATE TABLE tool_executions (id TEXT PRIMARY KEY, org TEXT NOT NULL, "
        "conversation TEXT NOT NULL, agent_id TEXT NOT NULL, function TEXT NOT NULL, "
        "status TEXT NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL)"
    )
    old = execution(7)
    legacy.execute(
        "INSERT INTO tool_executions VALUES (?,?,?,?,?,?,?,?)",
        (
            old.id,
            old.org,
            old.conversation,
            old.agent_id,
            old.function,
            old.status.value,
            old.created_at,
            old.to_json(),
        ),
    )
    legacy.commit()
    legacy.close()
    stores = open_sqlite(tmp_path / "siesta.db")
    assert stores.executions.get("o", "e7") == old
    stores.close()
    assert not (tmp_path / "tool-executions.db").exists()
    again = open_sqlite(tmp_path / "siesta.db")  # nothing to import twice
    assert [e.id for e in again.executions.find("o", ExecutionFilter())] == ["e7"]
    again.close()


def pending(i: int, org: str = "o", expires_at: float = 2000.0) -> ToolExecution:
    waiting = execution(i, ExecutionStatus.PENDING_APPROVAL, org=org)
    waiting.arguments = {"to": "a@b.c"}
    waiting.expires_at = expires_at
    return waiting


APPROVED = {"decision": "approved", "by": "p", "token": "t", "at": 0}


@pytest.mark.parametrize(
    ("now", "decided", "expired"),
    [(1999.0, True, False), (2000.0, False, True), (2500.0, False, True)],
    ids=["before-deadline", "at-deadline", "past-deadline"],
)
def test_an_approval_is_decided_before_its_deadline_and_expires_at_it(
    log: ExecutionStore, now: float, decided: bool, expired: bool
) -> None:
    log.add(pending(1))
    log.add(pending(2))
    decision = log.decide("o", "e1", APPROVED, ExecutionStatus.RUNNING, now)
    expiry = log.expire("o", "e2", now)
    assert (decision is not None) is decided
    assert (expiry is not None) is expired
    first, second = log.get("o", "e1"), log.get("o", "e2")
    assert first is not None and second is not None
    assert first.status is (
        ExecutionStatus.RUNNING if decided else ExecutionStatus.PENDING_APPROVAL
    )
    assert second.status is (
        ExecutionStatus.EXPIRED if expired else ExecutionStatus.PENDING_APPROVAL
    )


def test_a_settled_approval_keeps_the_call_but_not_its_arguments(log: ExecutionStore) -> None:
    log.add(pending(1))
    log.add(pending(2))
    log.decide("o", "e1", APPROVED, ExecutionStatus.RUNNING, 1500.0)
    log.expire("o", "e2", 2000.0)
    for stored in (log.get("o", "e1"), log.get("o", "e2")):
        assert stored is not None
        assert stored.pending is None and stored.arguments == {} and stored.arguments_deleted
        assert "a@b.c" not in stored.to_json() and stored.function == "runCommand"
    decided, expired = log.get("o", "e1"), log.get("o", "e2")
    assert decided is not None and decided.approval == APPROVED
    assert expired is not None and expired.approval == {"decision": "expired", "at": 2000.0}


def test_an_approval_settles_once_whichever_comes_first(log: ExecutionStore) -> None:
    log.add(pending(1))
    assert log.expire("o", "e1", 2000.0) is not None
    assert log.decide("o", "e1", APPROVED, ExecutionStatus.RUNNING, 1500.0) is None  # stale clock
    assert log.expire("o", "e1", 3000.0) is None


def test_expire_pending_reaches_every_org_and_only_past_deadlines(log: ExecutionStore) -> None:
    log.add(pending(1, org="o", expires_at=2000.0))
    log.add(pending(2, org="p", expires_at=2000.0))
    log.add(pending(3, org="o", expires_at=2600.0))
    log.add(execution(4))
    expired = log.expire_pending(2500.0)
    assert sorted((e.org, e.id) for e in expired) == [("o", "e1"), ("p", "e2")]
    assert all(e.status is ExecutionStatus.EXPIRED for e in expired)
    later = log.get("o", "e3")
    assert later is not None and later.status is ExecutionStatus.PENDING_APPROVAL
    assert log.expire_pending(2500.0) == []


def test_remove_older_than_reaches_every_org_and_keeps_newer_entries(log: ExecutionStore) -> None:
    for i in range(4):
        log.add(execution(i, org="o"))
        log.add(execution(10 + i, org="p"))
    log.add(pending(20, org="p", expires_at=5000.0))  # created at 1020
    assert log.remove_older_than(1002.0) == 2  # e0, e1: created at 1000 and 1001
    assert log.remove_older_than(1011.0) == 3  # e2, e3, and p's e10 (created at 1010)
    assert log.find("o", ExecutionFilter()) == []
    assert [e.id for e in log.find("p", ExecutionFilter())] == ["e20", "e13", "e12", "e11"]
    assert log.get("o", "e0") is None and log.get("p", "e10") is None
    assert log.get("p", "e11") is not None
    assert log.remove_older_than(1021.0) == 4
    assert log.find("o", ExecutionFilter()) == [] and log.find("p", ExecutionFilter()) == []
    assert log.expire_pending(9000.0) == []  # the removed approval is gone for the sweep too


def test_forgetting_a_conversation_removes_its_entries_and_no_one_elses(
    log: ExecutionStore,
) -> None:
    log.add(execution(1))
    log.add(execution(2, ExecutionStatus.RUNNING))
    log.add(pending(3))
    log.add(execution(4, conversation="d"))
    log.add(execution(5, org="p"))  # another org's conversation "c"
    assert log.forget_conversation("o", "c", 1500.0) == 3
    assert [log.get("o", f"e{i}") for i in (1, 2, 3)] == [None, None, None]
    assert [e.id for e in log.find("o", ExecutionFilter())] == ["e4"]
    assert [e.id for e in log.find("p", ExecutionFilter())] == ["e5"]
    assert log.expire_pending(9000.0) == []
    assert log.remove_older_than(9000.0) == 2
    assert log.forget_conversation("o", "c", 1500.0) == 0


def test_a_forgotten_approval_is_cancelled_until_its_deadline(log: ExecutionStore) -> None:
    log.add(pending(1, expires_at=2000.0))
    log.add(pending(2, expires_at=1400.0))  # past its deadline, not yet expired
    log.add(execution(3))
    log.forget_conversation("o", "c", 1500.0)
    assert log.decide("o", "e1", APPROVED, ExecutionStatus.RUNNING, 1500.0) is None
    assert log.cancelled("o", "e1", 1999.0)
    assert not log.cancelled("o", "e1", 2000.0)
    assert not log.cancelled("o", "e2", 1500.0) and not log.cancelled("o", "e3", 1500.0)
    assert not log.cancelled("p", "e1", 1500.0)


def test_a_save_never_brings_back_a_forgotten_entry(log: ExecutionStore) -> None:
    log.add(execution(1, ExecutionStatus.RUNNING))
    running = log.get("o", "e1")
    assert running is not None
    log.forget_conversation("o", "c", 1500.0)
    running.status = ExecutionStatus.SUCCEEDED
    log.save(running)
    assert log.get("o", "e1") is None and log.find("o", ExecutionFilter()) == []


@pytest.mark.parametrize("attempt", range(10))
def test_a_decision_and_a_deletion_never_both_win(log: ExecutionStore, attempt: int) -> None:
    log.add(pending(attempt))
    decided: list[ToolExecution | None] = []
    barrier = threading.Barrier(2)

    def approve() -> None:
        barrier.wait()
        decided.append(log.decide("o", f"e{attempt}", APPROVED, ExecutionStatus.RUNNING, 1500.0))

    def delete() -> None:
        barrier.wait()
        log.forget_conversation("o", "c", 1500.0)

    threads = [threading.Thread(target=approve), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Approved first: it runs (the deletion removes its entry). Deleted first: the
    # approval is cancelled and the decision finds nothing.
    assert (decided[0] is not None) is not log.cancelled("o", f"e{attempt}", 1500.0)
    assert log.get("o", f"e{attempt}") is None


def test_sqlite_keeps_a_cancelled_approval_no_longer_than_its_deadline(tmp_path: Path) -> None:
    stores = open_sqlite(tmp_path / "siesta.db")
    stores.executions.add(pending(1, expires_at=2000.0))
    stores.executions.forget_conversation("o", "c", 1500.0)
    stores.executions.expire_pending(2000.0)  # each sweep, and each read of the log
    stores.close()
    with sqlite3.connect(tmp_path / "siesta.db") as db:
        assert db.execute("SELECT * FROM cancelled_approvals").fetchall() == []
