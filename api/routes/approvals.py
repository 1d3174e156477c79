"""Calls that wait for approval, shown and decided: the ``approve`` scope.

Apart from the tool routes because it is a person's decision, relayed by whoever
shows approvals to people; by default that must be another token than the one
that asked for the call (``SIESTA_TOOLS__ALLOW_SELF_APPROVAL``).
"""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Query

from siesta_contract.tools import ApprovalPublic, ApprovalsPublic, Decision, ExecutionOutcome

from api.deps import CallerDep, OrgDep, ServicesDep, requires
from api.responses import COMMON, error_responses

router = APIRouter(
    prefix="/v1/tools/approvals",
    tags=["tools"],
    dependencies=requires("approve"),
    responses=error_responses(*COMMON, 404, 409, 410),
)


@router.get("")
def list_approvals(
    services: ServicesDep,
    org: OrgDep,
    conversation_id: Annotated[str | None, Query(alias="conversationId")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> ApprovalsPublic:
    """The org's calls waiting for a decision, oldest first: who asked, when each
    expires, which rule asked, and the arguments (texts over 4,096 characters cut here;
    ``GET .../approvals/{id}`` has them complete)."""
    found = services.tools.approvals(org, conversation_id, limit)
    return ApprovalsPublic.model_validate({"approvals": found})


@router.get("/{approval_id}")
def get_approval(approval_id: str, services: ServicesDep, org: OrgDep) -> ApprovalPublic:
    """One call waiting for a decision, with the complete arguments that run once it
    is approved (only values under secret-looking keys masked: ``maskedKeys``).

    404 for an id the org does not have; 409 when it was decided already; 410 when it
    expired or its conversation was deleted."""
    found = services.tools.approval(org, approval_id)
    return ApprovalPublic.model_validate(found)


@router.post("/{approval_id}", response_model_exclude_unset=True)
async def decide(
    approval_id: str,
    body: Decision,
    services: ServicesDep,
    caller: CallerDep,
    org: OrgDep,
) -> ExecutionOutcome:
    """Approve (the call runs, once) or deny a call that waits for approval.

    404 for an id the org does not have; 409 when it was decided already; 410 when
    it expired first (``approval_expired``) or its conversation was deleted
    (``approval_cancelled``: nothing runs); 403 when the token that asked for the call
    decides it and the deployment does not allow that.
    """
    result = await to_thread.run_sync(
        lambda: services.tools.decide(
            org, approval_id, body.decision == "approve", body.by, caller.name
        )
    )
    return ExecutionOutcome.model_validate(result)
