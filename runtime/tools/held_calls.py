"""A call held for approval: what is kept of it to run later, and the check that an
approved call still may run (its conversation was not deleted meanwhile)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from siesta_contract.agents import AgentConfig, UserInfo
from siesta_contract.tools import ExecutionStatus

from runtime.core.context import CallContext
from runtime.core.errors import ApprovalCancelled
from runtime.seams.stores import ExecutionStore
from runtime.tools.call import ToolCall
from runtime.tools.catalog import CatalogFunction


def call_data(call: ToolCall) -> dict[str, Any]:
    """What a held call needs to run later, as JSON (callbacks are not kept)."""
    ctx = call.ctx
    return {
        "ctx": {
            "org": ctx.org,
            "user": ctx.user,
            "conversation": ctx.conversation,
            "agent": ctx.agent,
            "base_image": ctx.base_image,
            "egress_allow": list(ctx.egress_allow) if ctx.egress_allow is not None else None,
            "sub_agents": list(ctx.sub_agents),
            "message": ctx.message,
        },
        "agent": call.agent.model_dump(mode="json", by_alias=True, exclude_none=True),
        "user": call.user.model_dump(mode="json"),
        "function": dataclasses.asdict(call.function),
        "timeout_seconds": call.timeout_seconds,
    }


def call_from_data(data: dict[str, Any], approval: str) -> ToolCall:
    ctx_data = data["ctx"]
    allow = ctx_data.get("egress_allow")
    ctx = CallContext(
        **{
            **ctx_data,
            "egress_allow": tuple(allow) if allow is not None else None,
            "sub_agents": tuple(ctx_data.get("sub_agents") or ()),
            "approval": approval,
        }
    )
    return ToolCall(
        ctx,
        AgentConfig.model_validate(data["agent"]),
        UserInfo.model_validate(data["user"]),
        CatalogFunction(**data["function"]),
        timeout_seconds=data.get("timeout_seconds"),
    )


def cancelled(approval_id: str) -> ApprovalCancelled:
    msg = f"approval {approval_id} was cancelled: its conversation was deleted, and nothing ran"
    return ApprovalCancelled(msg)


def admit_approved(log: ExecutionStore) -> Callable[[CallContext], None]:
    """The check an operation makes under the conversation's lease: a call run after
    its approval goes on only while its entry still says it runs. A deletion removes
    the entry under the same lease, so an approved call that had not reached the
    sandbox yet never provisions one for a deleted conversation."""

    def admit(ctx: CallContext) -> None:
        if ctx.approval is None:
            return
        execution = log.get(ctx.org, ctx.approval)
        if execution is None or execution.status is not ExecutionStatus.RUNNING:
            raise cancelled(ctx.approval)

    return admit
