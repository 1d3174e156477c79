"""Running one function call for a conversation: gating, approval, adapter, log.

Failures are results (``ok: false`` with a code), never exceptions, so the
agent's turn goes on. A function whose policy is ``confirm`` answers
``approval_required`` and runs only when approved, exactly once, by a decision
made before its deadline — by default with another token than the one that
asked (a token deciding its own request could approve anything it asks for).
Deleting the conversation cancels its approvals: one not yet decided can no longer
be, and one approved but not yet started never starts (``admit_approved``, checked
under the conversation's lease, which the deletion holds too).

Over 400 lines: it is the one path every call takes (gating, approval, run, log),
read best in its order; held calls, approval views and the log's shaping are apart.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from siesta_contract.agents import AgentConfig, Policy, UserInfo
from siesta_contract.tools import ExecutionStatus

from runtime.core import tracing
from runtime.core.context import CallContext
from runtime.core.errors import (
    ApprovalAlreadyDecided,
    ApprovalCancelled,
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
from runtime.core.records import ExecutionFilter, ToolExecution
from runtime.functions.base import FunctionSpec
from runtime.seams.stores import ExecutionStore
from runtime.tools.approval_view import approval_view
from runtime.tools.call import (
    Adapter,
    CallEvents,
    ToolCall,
    agent_context,
    direct_agent,
)
from runtime.tools.catalog import CatalogFunction
from runtime.tools.direct_policy import CatalogFor, DirectPolicies, OrgFloor
from runtime.tools.door import DOOR_FUNCTIONS, GRANT, DoorCall, Redeem
from runtime.tools.executions import redact
from runtime.tools.held_calls import call_data, call_from_data, cancelled
from runtime.tools.policy import STRICTNESS, EffectivePolicy

log = logging.getLogger(__name__)

ConnectionAdapters = Callable[[str], Adapter]


@dataclass(frozen=True)
class ApprovalRules:
    ttl_seconds: float = 3600.0
    """How long a call waits for its decision (``SIESTA_TOOLS__APPROVAL_TTL_SECONDS``)."""
    allow_self_approval: bool = False
    """``SIESTA_TOOLS__ALLOW_SELF_APPROVAL``."""


class ToolExecutor:
    """Every call of an agent function goes through here, whichever route it came
    by: ``/v1/tools/execute`` (``execute``: tool-style answers) and the direct
    sandbox and JavaScript routes (``run_direct``: results or raised errors).
    Both check the same policies and write the same executions log."""

    def __init__(
        self,
        catalog_for: CatalogFor,
        adapters: dict[str, Adapter],
        log: ExecutionStore,
        connection: ConnectionAdapters | None = None,
        clock: Callable[[], float] = time.time,
        approvals: ApprovalRules | None = None,
        deployment_policies: Mapping[str, Policy] | None = None,
        org_floor: OrgFloor | None = None,
        redeem: Redeem | None = None,
    ) -> None:
        self._catalog_for = catalog_for
        self._adapters = adapters
        self._connection = connection
        self._log = log
        self._clock = clock
        self._approvals = approvals or ApprovalRules()
        self._redeem = redeem
        self._direct = DirectPolicies(
            catalog_for, dict(deployment_policies or {}), org_floor or (lambda org, agent: {})
        )

    def execute(
        self,
        org: str,
        conversation: str,
        agent: AgentConfig,
        user: UserInfo,
        function: str,
        arguments: dict[str, Any],
        requested_by: str | None = None,
        events: CallEvents | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Run (or hold for approval) one call; ``requested_by`` is the token's name,
        ``message`` the assistant message the call belongs to."""
        ctx = agent_context(org, conversation, agent, user, message)
        catalog = self._catalog_for(agent, user, org)
        entry = catalog.find(function)
        execution = self._new_execution(ctx, agent, user, function, arguments, requested_by)
        if entry is None:
            reasons = "; ".join(catalog.notes) or "it is not assigned to the agent"
            execution.source = ""
            self._log.add(execution)
            return self._finish(
                execution,
                error=FunctionNotAvailable(
                    f"{function} is not available to this agent for this user: {reasons}"
                ).to_dict(),
            )
        execution.source = entry.source
        call = ToolCall(ctx, agent, user, entry, events or CallEvents())
        if entry.policy == "confirm":
            held = self._hold(execution, call, arguments)
            return {
                "ok": False,
                "executionId": execution.id,
                "status": execution.status.value,
                "error": held.to_dict(),
            }
        self._log.add(execution)
        return self._run(execution, call, arguments)

    def run_direct(
        self,
        ctx: CallContext,
        function: FunctionSpec,
        tool: str,
        arguments: dict[str, Any],
        requested_by: str | None = None,
        events: CallEvents | None = None,
        timeout_seconds: float | None = None,
    ) -> Any:
        """A direct route's call (``tool`` is the System Tool it belongs to): the
        policy for it, one log entry, and the adapter's result — or the error raised
        (``approval_required`` when the policy is ``confirm``). A registered agent's
        call (``ctx.agent_config``) gets that agent's policy and must have ``tool``
        among its System Tools, as in its catalog; any other gets the deployment's
        and org's floors over the reference's defaults."""
        rule = self._direct.policy(ctx, function.name, tool)
        user = UserInfo(id=ctx.user, role="User")  # direct routes serve no role-gated tool
        entry = CatalogFunction(
            function.name,
            function.description,
            {},
            "System",
            f"system:{tool}",
            rule.policy,
            rule.reason,
        )
        agent = ctx.agent_config or direct_agent(ctx)
        call = ToolCall(ctx, agent, user, entry, events or CallEvents(), timeout_seconds)
        execution = self._new_execution(ctx, agent, user, function.name, arguments, requested_by)
        execution.source = entry.source
        if rule.policy == "confirm":
            raise self._hold(execution, call, arguments)
        self._log.add(execution)
        started = time.monotonic()
        with _span(execution, call) as span:
            try:
                result = self._adapters[function.name](call, arguments)
            except SiestaError as error:
                self._finish(execution, error=error.to_dict(), started=started)
                raise
            except Exception as error:
                failed = ToolFailed(f"{function.name} failed: {type(error).__name__}")
                self._finish(execution, error=failed.to_dict(), started=started)
                raise
            tracing.outcome(span, None)
        self._finish(execution, result=result, started=started)
        return result

    @contextlib.contextmanager
    def through_door(
        self, ctx: CallContext, door: DoorCall, requested_by: str
    ) -> Iterator[ToolExecution]:
        """A programmatic face's call (``door.py``): its policy, its log entry around
        the block (which may set the entry's ``result``), or the error that refuses it:
        ``function_not_available``, or ``approval_required`` until a person approved
        this very call, which then runs once."""
        rule = self._door_policy(ctx, door.function)
        user = UserInfo(id=ctx.user, role="User")
        agent = ctx.agent_config or direct_agent(ctx)
        execution = self._new_execution(
            ctx, agent, user, door.function, door.arguments, requested_by
        )
        execution.source = "system:sandbox"
        if rule.policy == "confirm":
            grant = self._redeem_grant(ctx, door, requested_by)
            if grant is None:
                entry = CatalogFunction(
                    door.function, "", {}, "System", "system:sandbox", rule.policy, rule.reason
                )
                call = ToolCall(ctx, agent, user, entry, CallEvents())
                raise self._hold(execution, call, door.arguments, door=door.fingerprint)
            execution.approval = {"grant": grant}
        self._log.add(execution)
        started = time.monotonic()
        try:
            yield execution
        except SiestaError as error:
            self._finish(execution, error=error.to_dict(), started=started)
            raise
        except Exception as error:
            failed = ToolFailed(f"{door.function} failed: {type(error).__name__}")
            self._finish(execution, error=failed.to_dict(), started=started)
            raise
        self._finish(execution, result=execution.result, started=started)

    def _door_policy(self, ctx: CallContext, function: str) -> EffectivePolicy:
        """The stricter of the function's own policy and the one it follows."""
        rules = [self._direct.policy(ctx, function, "sandbox")]
        follows = DOOR_FUNCTIONS[function]
        if follows is not None:
            rules.append(self._direct.policy(ctx, follows, "sandbox"))
        return max(rules, key=lambda rule: STRICTNESS[rule.policy])

    def _redeem_grant(self, ctx: CallContext, door: DoorCall, requested_by: str) -> str | None:
        """The approval granted to this very call, taken now (``None``: none stands)."""
        ttl = self._approvals.ttl_seconds
        now = self._clock()
        where = ExecutionFilter(
            conversation=ctx.conversation,
            function=door.function,
            status=ExecutionStatus.SUCCEEDED,
            since=now - 2 * ttl,
            limit=100,
        )
        for granted in self._log.find(ctx.org, where):
            decided_at = float((granted.approval or {}).get("at", 0))
            if (
                granted.result == {GRANT: door.fingerprint}
                and granted.requested_by == requested_by
                and now - decided_at <= ttl
                and self._redeem is not None
                and self._redeem(granted.id, ttl)
            ):
                return granted.id
        return None

    def direct_available(self, ctx: CallContext, functions: Mapping[str, str]) -> list[str]:
        """Of ``functions`` (name → System Tool), those a direct caller may call."""
        return self._direct.available(ctx, functions)

    def _new_execution(
        self,
        ctx: CallContext,
        agent: AgentConfig,
        user: UserInfo,
        function: str,
        arguments: dict[str, Any],
        requested_by: str | None,
    ) -> ToolExecution:
        return ToolExecution(
            id=uuid.uuid4().hex,
            org=ctx.org,
            conversation=ctx.conversation,
            agent_id=agent.id,
            user_id=user.id,
            function=function,
            source="",
            arguments=redact(arguments),
            status=ExecutionStatus.RUNNING,
            created_at=self._clock(),
            requested_by=requested_by,
        )

    def _hold(
        self,
        execution: ToolExecution,
        call: ToolCall,
        arguments: dict[str, Any],
        door: str | None = None,
    ) -> ApprovalRequired:
        """Log the call as waiting for a decision; the error that says so. ``door``: the
        fingerprint of a door call, which an approval grants rather than runs."""
        execution.status = ExecutionStatus.PENDING_APPROVAL
        execution.pending = {**call_data(call), "arguments": arguments}
        if door is not None:
            execution.pending["door"] = door
        execution.expires_at = execution.created_at + self._approvals.ttl_seconds
        self._log.add(execution)
        then = "; once approved, make the same call again" if door is not None else ""
        return ApprovalRequired(
            f"{execution.function} needs a person's approval before it runs "
            f"({call.function.policy_reason}): approval {execution.id}{then}",
            approvalId=execution.id,
            executionId=execution.id,
            expiresAt=execution.expires_at,
        )

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
        if request.get("door"):  # granted, not run: its caller makes the call again
            return self._finish(execution, result={GRANT: request["door"]})
        call = call_from_data(request, approval=execution.id)
        return self._run(execution, call, request.get("arguments") or {})

    def approvals(self, org: str, conversation: str | None, limit: int) -> list[dict[str, Any]]:
        """The org's calls waiting for a decision (oldest first), long texts cut."""
        now = self._clock()
        where = ExecutionFilter(
            conversation=conversation, status=ExecutionStatus.PENDING_APPROVAL, limit=limit
        )
        found = [e for e in self._log.find(org, where) if not e.expired(now)]
        oldest_first = sorted(found, key=operator.attrgetter("created_at"))
        return [approval_view(e, complete=False) for e in oldest_first]

    def approval(self, org: str, approval_id: str) -> dict[str, Any]:
        """One call waiting for a decision, its arguments complete; raises as ``decide``
        does when it no longer waits (decided, expired, cancelled, not the org's)."""
        return approval_view(self._pending(org, approval_id, self._clock()), complete=True)

    def forget_conversation(self, org: str, conversation: str) -> int:
        """The conversation was deleted: its log entries go, its approvals are cancelled."""
        return self._log.forget_conversation(org, conversation, self._clock())

    def find(self, org: str | None, where: ExecutionFilter) -> list[ToolExecution]:
        """The org's executions matching ``where`` (``None``: every org's), newest first."""
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
            if self._log.cancelled(org, approval_id, now):
                raise cancelled(approval_id)
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
        self, execution: ToolExecution, call: ToolCall, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        with _span(execution, call) as span:
            answer = self._call_adapter(execution, call, arguments)
            tracing.outcome(span, None if answer["ok"] else answer["error"].get("code"))
            return answer

    def _call_adapter(
        self, execution: ToolExecution, call: ToolCall, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        entry = call.function
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
            result = adapter(call, arguments)
        except ApprovalCancelled:
            raise  # nothing ran, and there is no entry left to finish
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
        execution.result = redact(result) if error is None else None
        execution.error = redact(error)
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


def _span(
    execution: ToolExecution, call: ToolCall
) -> contextlib.AbstractContextManager[tracing.Span]:
    """The span of one function call: which function, by which policy; never its arguments."""
    return tracing.span(
        "tool.execute",
        org=call.ctx.org,
        conversation=call.ctx.conversation,
        function=call.function.name,
        policy=call.function.policy,
        source=call.function.source,
        execution_id=execution.id,
    )
