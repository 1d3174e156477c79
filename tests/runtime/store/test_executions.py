"""The executions log contract, on SQLite and on Redis."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from runtime.store.base import ExecutionStore, Stores
from runtime.store.records import ExecutionFilter, ExecutionStatus, ToolExecution
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
