"""Running one function call for a conversation: gating, approval, adapter, log.

Failures are results (``ok: false`` with a code), never exceptions, so the
agent's turn goes on. A function whose policy is ``confirm`` answers
``approval_required`` and runs only when approved, exactly once, by a decision
made before its deadline — by default with another token than the one that
asked (a token deciding its own request could approve anything it asks for).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.context import CallContext
from runtime.errors import (
    ApprovalAlreadyDecided,
    ApprovalDenied,
    ApprovalExpired,
    ApprovalRequired,
    FunctionNotAvailable,
    NotFound,
    SelfApprovalNotAllowed,
    SiestaError,
    ToolFailed,
    ToolNotConfigured,
)
from runtime.store.base import ExecutionStore
from runtime.store.records import ExecutionFilter, ExecutionStatus, ToolExecution
from runtime.tools.catalog import Catalog, CatalogFunction
from runtime.tools.executions import redact
from runtime.tools.models import AgentConfig, UserInfo

log = logging.getLogger(__name__)

Adapter = Callable[[CallContext, dict[str, Any]], Any]
CatalogFor = Callable[[AgentConfig, UserInfo], Catalog]


@dataclass(frozen=True)
class ApprovalRules:
    ttl_seconds: float = 3600.0
    """How long a call waits for its decision (``SIESTA_TOOLS__APPROVAL_TTL_SECONDS``)."""
    allow_self_approval: bool = False
    """``SIESTA_TOOLS__ALLOW_SELF_APPROVAL``."""


class ToolExecutor:
    def __init__(
        self,
        catalog_for: CatalogFor,
        adapters: dict[str, Adapter],
        log: ExecutionStore,
        connection: Callable[[str], Adapter] | None = None,
        clock: Callable[[], float] = time.time,
        approvals: ApprovalRules | None = None,
    ) -> None:
        self._catalog_for = catalog_for
        self._adapters = adapters
        self._connection = connection
        self._log = log
        self._clock = clock
        self._approvals = approvals or ApprovalRules()

    def execute(
        self,
        org: str,
        conversation: str,
        agent: AgentConfig,
        user: UserInfo,
        function: str,
        arguments: dict[str, Any],
        requested_by: str | None = None,
    ) -> dict[str, Any]:
        """Run (or hold for approval) one call; ``requested_by`` is the token's name."""
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
            requested_by=requested_by,
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
            execution.expires_at = execution.created_at + self._approvals.ttl_seconds
            self._log.add(execution)
            return {
                "ok": False,
                "executionId": execution.id,
                "status": execution.status.value,
                "error": ApprovalRequired(
                    f"{function} needs a person's approval before it runs",
                    approvalId=execution.id,
                    expiresAt=execution.expires_at,
                ).to_dict(),
            }
        self._log.add(execution)
        return self._run(execution, entry, ctx, arguments)

    def decide(
        self, org: str, approval_id: str, approve: bool, by: str, token: str
    ) -> dict[str, Any]:
        """Approve (and run) or deny a pending call, as the person ``by`` through the
        token named ``token``. Raises when it cannot be decided: not the org's
        (``NotFound``), expired, decided already, or asked for by this token."""
        now = self._clock()
        pending = self._pending(org, approval_id, now)
        if pending.requested_by == token and not self._approvals.allow_self_approval:
            msg = (
                f"approval {approval_id} was asked for with the token {token!r}; "
                "another token must decide it"
            )
            raise SelfApprovalNotAllowed(msg, token=token)
        approval = {
            "decision": "approved" if approve else "denied",
            "by": by,
            "token": token,
            "at": now,
        }
        status = ExecutionStatus.RUNNING if approve else ExecutionStatus.DENIED
        execution = self._log.decide(org, approval_id, approval, status, now)
        if execution is None:  # decided or expired since it was read: say which
            self._pending(org, approval_id, self._clock())
            raise self._already_decided(approval_id, self._log.get(org, approval_id))
        log.info("approval %s %s by %s (token %s)", approval_id, approval["decision"], by, token)
        if not approve:
            return self._finish(
                execution,
                error=ApprovalDenied(f"{execution.function} was denied by {by}").to_dict(),
                status=ExecutionStatus.DENIED,
            )
        request = pending.pending or {}
        ctx = _ctx_from_data(request["ctx"])
        entry = CatalogFunction(execution.function, "", {}, "", execution.source, "confirm")
        return self._run(execution, entry, ctx, request.get("arguments") or {})

    def find(self, org: str, where: ExecutionFilter) -> list[ToolExecution]:
        self._log.expire_pending(self._clock())  # so that the statuses read are true now
        return self._log.find(org, where)

    def get(self, org: str, execution_id: str) -> ToolExecution | None:
        execution = self._log.get(org, execution_id)
        if execution is not None and execution.expired(now := self._clock()):
            return self._log.expire(org, execution_id, now) or self._log.get(org, execution_id)
        return execution

    def _pending(self, org: str, approval_id: str, now: float) -> ToolExecution:
        """The pending execution, or the error that says why there is none."""
        execution = self._log.get(org, approval_id)
        if execution is None:
            msg = f"no approval {approval_id!r}"
            raise NotFound(msg)
        if execution.expired(now):
            execution = self._log.expire(org, approval_id, now) or self.get(org, approval_id)
        if execution is not None and execution.status is ExecutionStatus.EXPIRED:
            msg = (
                f"approval {approval_id} expired before it was decided (approvals wait at "
                f"most {self._approvals.ttl_seconds:g} s)"
            )
            raise ApprovalExpired(msg, limit=self._approvals.ttl_seconds, unit="seconds")
        if execution is None or execution.status is not ExecutionStatus.PENDING_APPROVAL:
            raise self._already_decided(approval_id, execution)
        return execution

    def _already_decided(
        self, approval_id: str, execution: ToolExecution | None
    ) -> ApprovalAlreadyDecided:
        # A replay: the decision was made already and nothing runs again.
        status = execution.status.value if execution else "gone"
        msg = f"approval {approval_id} was decided already ({status})"
        return ApprovalAlreadyDecided(msg, execution=execution.public() if execution else None)

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
