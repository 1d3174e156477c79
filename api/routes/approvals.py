"""Deciding a call that waits for approval: the ``approve`` scope.

Apart from the tool routes because it is a person's decision, relayed by whoever
shows approvals to people; by default that must be another token than the one
that asked for the call (``SIESTA_TOOLS__ALLOW_SELF_APPROVAL``).
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter

from siesta_contract.tools import Decision, ExecutionOutcome

from api.deps import CallerDep, ServicesDep, requires
from api.responses import COMMON, error_responses
from api.routes.tools import OrgHeader, org_of

router = APIRouter(
    prefix="/v1/tools/approvals",
    tags=["tools"],
    dependencies=requires("approve"),
    responses=error_responses(*COMMON, 404, 409, 410),
)


@router.post("/{approval_id}", response_model_exclude_unset=True)
async def decide(
    approval_id: str,
    body: Decision,
    services: ServicesDep,
    caller: CallerDep,
    x_siesta_org: OrgHeader = None,
) -> ExecutionOutcome:
    """Approve (the call runs, once) or deny a call that waits for approval.

    404 for an id the org does not have; 409 when it was decided already; 410 when
    it expired first (``approval_expired``) or its conversation was deleted
    (``approval_cancelled``: nothing runs); 403 when the token that asked for the call
    decides it and the deployment does not allow that.
    """
    org = org_of(x_siesta_org)
    result = await to_thread.run_sync(
        lambda: services.tools.decide(
            org, approval_id, body.decision == "approve", body.by, caller.name
        )
    )
    return ExecutionOutcome.model_validate(result)
