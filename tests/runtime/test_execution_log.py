"""The executions log contract, on SQLite and on Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.tools.executions import (
    ExecutionFilter,
    ExecutionLog,
    ExecutionStatus,
    SqliteExecutionLog,
    ToolExecution,
    redact,
)
from runtime.tools.redis_log import RedisExecutionLog
from tests.redis_server import RedisServer


@pytest.fixture(params=["sqlite", "redis"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionLog]:
    if request.param == "sqlite":
        backend: ExecutionLog = SqliteExecutionLog(tmp_path / "x.db")
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        backend = RedisExecutionLog(server.url)
    yield backend
    backend.close()


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


def test_add_get_save(log: ExecutionLog) -> None:
    log.add(execution(1, ExecutionStatus.RUNNING))
    stored = log.get("o", "e1")
    assert stored is not None and stored.status is ExecutionStatus.RUNNING
    stored.status, stored.result = ExecutionStatus.SUCCEEDED, {"exitCode": 0}
    log.save(stored)
    assert log.get("o", "e1") == stored
    assert log.get("other-org", "e1") is None


def test_a_decision_is_taken_once_even_when_raced(log: ExecutionLog) -> None:
    log.add(execution(1, ExecutionStatus.PENDING_APPROVAL))
    winners: list[ToolExecution] = []

    def approve() -> None:
        decided = log.decide(
            "o", "e1", {"decision": "approved", "by": "x"}, ExecutionStatus.RUNNING
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
    assert log.decide("o", "e1", {"decision": "denied"}, ExecutionStatus.DENIED) is None


def test_find_filters_newest_first(log: ExecutionLog) -> None:
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
