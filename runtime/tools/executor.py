"""Running one function call for a conversation: gating, approval, adapter, log.

Failures are results (``ok: false`` with a code), never exceptions, so the
agent's turn goes on. A function whose policy is ``confirm`` answers
``approval_required`` and runs only when approved, exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from runtime.context import CallContext
from runtime.errors import (
    ApprovalDenied,
    ApprovalRequired,
    FunctionNotAvailable,
    SiestaError,
    ToolFailed,
    ToolNotConfigured,
)
from runtime.store.base import ExecutionStore
from runtime.store.records import ExecutionFilter, ExecutionStatus, ToolExecution
from runtime.tools.catalog import Catalog, CatalogFunction
from runtime.tools.executions import redact
from runtime.tools.models import AgentConfig, UserInfo

Adapter = Callable[[CallContext, dict[str, Any]], Any]
CatalogFor = Callable[[AgentConfig, UserInfo], Catalog]


class ToolExecutor:
    def __init__(
        self,
        catalog_for: CatalogFor,
        adapters: dict[str, Adapter],
        log: ExecutionStore,
        connection: Callable[[str], Adapter] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._catalog_for = catalog_for
        self._adapters = adapters
        self._connection = connection
        self._log = log
        self._clock = clock

    def execute(
        self,
        org: str,
        conversation: str,
        agent: AgentConfig,
        user: UserInfo,
        function: str,
        arguments: dict[str, Any],
    ) -> dict[str, Any]:
        ctx = CallContext(
            org,
            user.id,
            conversation,
            agent=agent.id,
            base_image=agent.base_image,
            egress_allow=tuple(agent.egress_allow) if agent.egress_allow is not None else None,
        )
        catalog = self._catalog_for(agent, user)
        entry = catalog.find(function)
        execution = ToolExecution(
            id=uuid.uuid4().hex,
            org=org,
            conversation=conversation,
            agent_id=agent.id,
            user_id=user.id,
            function=function,
            source=entry.source if entry else "",
            arguments=redact(arguments),
            status=ExecutionStatus.RUNNING,
            created_at=self._clock(),
        )
        if entry is None:
            reasons = "; ".join(catalog.notes) or "it is not assigned to the agent"
            self._log.add(execution)
            return self._finish(
                execution,
                error=FunctionNotAvailable(
                    f"{function} is not available to this agent for this user: {reasons}"
                ).to_dict(),
            )
        if entry.policy == "confirm":
            execution.status = ExecutionStatus.PENDING_APPROVAL
            execution.pending = {"ctx": _ctx_data(ctx), "arguments": arguments}
            self._log.add(execution)
            return {
                "ok": False,
                "executionId": execution.id,
                "status": execution.status.value,
                "error": ApprovalRequired(
                    f"{function} needs a person's approval before it runs",
                    approvalId=execution.id,
                ).to_dict(),
            }
        self._log.add(execution)
        return self._run(execution, entry, ctx, arguments)

    def decide(self, org: str, approval_id: str, approve: bool, by: str) -> dict[str, Any] | None:
        """Approve (and run) or deny a pending call; ``None`` when nothing is pending."""
        approval = {"decision": "approved" if approve else "denied", "by": by, "at": self._clock()}
        status = ExecutionStatus.RUNNING if approve else ExecutionStatus.DENIED
        execution = self._log.decide(org, approval_id, approval, status)
        if execution is None:
            return None
        pending, execution.pending = execution.pending or {}, None
        if not approve:
            return self._finish(
                execution,
                error=ApprovalDenied(f"{execution.function} was denied by {by}").to_dict(),
                status=ExecutionStatus.DENIED,
            )
        ctx = _ctx_from_data(pending["ctx"])
        entry = CatalogFunction(execution.function, "", {}, "", execution.source, "confirm")
        return self._run(execution, entry, ctx, pending.get("arguments") or {})

    def find(self, org: str, where: ExecutionFilter) -> list[ToolExecution]:
        return self._log.find(org, where)

    def get(self, org: str, execution_id: str) -> ToolExecution | None:
        return self._log.get(org, execution_id)

    def _run(
        self,
        execution: ToolExecution,
        entry: CatalogFunction,
        ctx: CallContext,
        arguments: dict[str, Any],
    ) -> dict[str, Any]:
        adapter = self._adapter_for(entry)
        started = time.monotonic()
        if adapter is None:
            return self._finish(
                execution,
                error=ToolNotConfigured(
                    f"{entry.name} has no adapter in this deployment"
                ).to_dict(),
                started=started,
            )
        try:
            result = adapter(ctx, arguments)
        except SiestaError as error:
            return self._finish(execution, error=error.to_dict(), started=started)
        except Exception as error:  # an adapter bug must not end the agent's turn
            return self._finish(
                execution,
                error=ToolFailed(f"{entry.name} failed: {type(error).__name__}").to_dict(),
                started=started,
            )
        return self._finish(execution, result=result, started=started)

    def _adapter_for(self, entry: CatalogFunction) -> Adapter | None:
        if entry.source.startswith("connection:"):
            return self._connection(entry.name) if self._connection else None
        return self._adapters.get(entry.name)

    def _finish(
        self,
        execution: ToolExecution,
        *,
        result: Any = None,
        error: dict[str, Any] | None = None,
        started: float | None = None,
        status: ExecutionStatus | None = None,
    ) -> dict[str, Any]:
        execution.result = result if error is None else None
        execution.error = error
        execution.status = status or (
            ExecutionStatus.FAILED if error else ExecutionStatus.SUCCEEDED
        )
        if started is not None:
            execution.duration_ms = int((time.monotonic() - started) * 1000)
        self._log.save(execution)
        if error is not None:
            return {
                "ok": False,
                "executionId": execution.id,
                "status": execution.status.value,
                "error": error,
            }
        return {
            "ok": True,
            "executionId": execution.id,
            "status": execution.status.value,
            "result": result,
        }


def _ctx_data(ctx: CallContext) -> dict[str, Any]:
    return {
        "org": ctx.org,
        "user": ctx.user,
        "conversation": ctx.conversation,
        "agent": ctx.agent,
        "base_image": ctx.base_image,
        "egress_allow": list(ctx.egress_allow) if ctx.egress_allow is not None else None,
    }


def _ctx_from_data(data: dict[str, Any]) -> CallContext:
    allow = data.get("egress_allow")
    return CallContext(**{**data, "egress_allow": tuple(allow) if allow is not None else None})
