"""Approvals and the executions log's retention, on SQLite and on Redis, with a
manual clock: who may decide, expiry (lazy and swept), arguments deleted."""

from __future__ import annotations

from typing import Any

import pytest

from siesta_contract.agents import AgentConfig, UserInfo
from siesta_contract.tools import ExecutionStatus

from runtime.core.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    NotFound,
    SelfApprovalNotAllowed,
)
from runtime.core.records import ExecutionFilter
from runtime.seams.stores import Stores
from runtime.tools.call import ToolCall
from runtime.tools.catalog import Catalog, CatalogFunction
from runtime.tools.executions import DAY_SECONDS, ExecutionsSweep
from runtime.tools.executor import ApprovalRules, ToolExecutor
from runtime.tools.settings import ToolSettings
from tests.manual_clock import ManualClock

AGENT = AgentConfig.model_validate({"id": "agent"})
USER = UserInfo.model_validate({"id": "user", "role": "User"})
TTL = 600.0
CATALOG = Catalog(
    [
        CatalogFunction("send", "", {}, "System", "system:x", "confirm"),
        CatalogFunction("look", "", {}, "System", "system:x", "enabled"),
    ]
)


class Approvals:
    def __init__(self, store: Stores, allow_self_approval: bool = False) -> None:
        self.clock = ManualClock()
        self.ran: list[dict[str, Any]] = []
        self.log = store.executions

        def record(call: ToolCall, arguments: dict[str, Any]) -> str:
            self.ran.append(arguments)
            return "done"

        self.executor = ToolExecutor(
            lambda agent, user, org: CATALOG,
            {"send": record, "look": record},
            store.executions,
            clock=self.clock.time,
            approvals=ApprovalRules(TTL, allow_self_approval),
        )

    def ask(self, org: str = "o", function: str = "send") -> str:
        arguments = {"to": "someone@example.com", "body": "the secret plan"}
        outcome = self.executor.execute(org, "c", AGENT, USER, function, arguments, "backend")
        return str(outcome["executionId"])


@pytest.fixture
def tools(store: Stores) -> Approvals:
    return Approvals(store)


def test_the_token_that_asked_may_not_decide(tools: Approvals) -> None:
    approval = tools.ask()
    with pytest.raises(SelfApprovalNotAllowed) as refused:
        tools.executor.decide("o", approval, True, "person", "backend")
    assert refused.value.fields == {"token": "backend"}
    assert tools.ran == []
    outcome = tools.executor.decide("o", approval, True, "person", "approver")
    assert outcome["ok"] is True and tools.ran == [
        {"to": "someone@example.com", "body": "the secret plan"}
    ]


def test_a_deployment_may_allow_self_approval(store: Stores) -> None:
    tools = Approvals(store, allow_self_approval=True)
    approval = tools.ask()
    assert tools.executor.decide("o", approval, True, "person", "backend")["ok"] is True


def test_a_decided_approval_keeps_who_decided_but_not_the_arguments(tools: Approvals) -> None:
    approved, denied = tools.ask(), tools.ask()
    tools.executor.decide("o", approved, True, "ann", "approver")
    tools.executor.decide("o", denied, False, "bob", "approver")
    for execution_id, status, person in (
        (approved, ExecutionStatus.SUCCEEDED, "ann"),
        (denied, ExecutionStatus.DENIED, "bob"),
    ):
        stored = tools.executor.get("o", execution_id)
        assert stored is not None and stored.status is status
        assert stored.function == "send" and stored.requested_by == "backend"
        assert stored.approval is not None and stored.approval["by"] == person
        assert stored.approval["token"] == "approver"
        assert stored.arguments == {} and stored.arguments_deleted and stored.pending is None
        assert "secret plan" not in stored.to_json()
    with pytest.raises(ApprovalAlreadyDecided):
        tools.executor.decide("o", approved, True, "ann", "approver")
    assert len(tools.ran) == 1


def test_a_call_that_needs_no_approval_keeps_its_arguments(tools: Approvals) -> None:
    stored = tools.executor.get("o", tools.ask(function="look"))
    assert stored is not None and stored.arguments["body"] == "the secret plan"
    assert not stored.arguments_deleted and stored.expires_at is None


def test_an_approval_expires_after_the_ttl_and_then_cannot_be_decided(tools: Approvals) -> None:
    approval = tools.ask()
    tools.clock.advance(TTL - 1)
    stored = tools.executor.get("o", approval)
    assert stored is not None and stored.status is ExecutionStatus.PENDING_APPROVAL
    tools.clock.advance(1)
    with pytest.raises(ApprovalExpired) as expired:
        tools.executor.decide("o", approval, True, "ann", "approver")
    assert expired.value.fields == {"limit": TTL, "unit": "seconds"}
    assert tools.ran == []
    stored = tools.executor.get("o", approval)
    assert stored is not None and stored.status is ExecutionStatus.EXPIRED
    assert (
        stored.arguments == {} and stored.pending is None and "secret plan" not in stored.to_json()
    )
    with pytest.raises(ApprovalExpired):  # and stays so
        tools.executor.decide("o", approval, False, "ann", "approver")


def test_the_log_shows_expired_approvals_before_any_sweep(tools: Approvals) -> None:
    approval = tools.ask()
    tools.clock.advance(TTL)
    where = ExecutionFilter(status=ExecutionStatus.EXPIRED)
    assert [e.id for e in tools.executor.find("o", where)] == [approval]


def test_another_orgs_approval_is_not_found(tools: Approvals) -> None:
    approval = tools.ask(org="o")
    with pytest.raises(NotFound):
        tools.executor.decide("p", approval, True, "ann", "approver")
    assert tools.executor.get("p", approval) is None
    stored = tools.executor.get("o", approval)
    assert stored is not None and stored.status is ExecutionStatus.PENDING_APPROVAL


def test_the_sweep_expires_approvals_and_removes_entries_past_retention(tools: Approvals) -> None:
    sweep = ExecutionsSweep(tools.log, ToolSettings(executions_retention_days=30), tools.clock.time)
    old_call, old_approval = tools.ask(function="look"), tools.ask()
    tools.clock.advance(TTL)
    first = sweep.sweep()
    assert first.expired == [old_approval] and first.removed == 0
    expired = tools.log.get("o", old_approval)
    assert expired is not None and expired.status is ExecutionStatus.EXPIRED
    tools.clock.advance(29 * DAY_SECONDS)
    recent = tools.ask(function="look")
    assert sweep.sweep().removed == 0
    tools.clock.advance(DAY_SECONDS)
    second = sweep.sweep()
    assert second.removed == 2 and second.expired == []
    assert tools.log.get("o", old_call) is None and tools.log.get("o", old_approval) is None
    assert [e.id for e in tools.log.find("o", ExecutionFilter())] == [recent]
