"""A conversation's sandbox as a resource: inspect it, tear it down."""

from __future__ import annotations

from fastapi import APIRouter, Response

from siesta_contract.conversations import ConversationDeleted, SandboxPublic

from api.deps import ContextDep, ServicesDep, requires
from api.responses import CONVERSATION, error_responses
from runtime.core.errors import NotFound
from runtime.images.catalog import split_selection

router = APIRouter(
    prefix="/v1/conversations",
    tags=["conversations"],
    dependencies=requires("sandbox"),
    responses=error_responses(*CONVERSATION, 404),
)


@router.get("/{conversation_id}/sandbox")
def describe_sandbox(ctx: ContextDep, services: ServicesDep) -> SandboxPublic:
    record = services.sessions.describe(ctx)
    if record is None:
        msg = f"conversation {ctx.conversation!r} has no sandbox session"
        raise NotFound(msg)
    return SandboxPublic(
        sessionId=record.session_id,
        imageId=split_selection(record.image_id)[0],
        imageTag=split_selection(record.image_id)[1],
        imageRef=record.image_ref,
        status=record.status.value,
        state=services.sessions.sandbox_state(record).value,
        createdAt=record.created_at,
        lastUsedAt=record.last_used_at,
        generation=record.generation,
    )


@router.delete(
    "/{conversation_id}",
    responses={202: {"model": ConversationDeleted, "description": "Teardown pending"}},
)
def delete_conversation(
    ctx: ContextDep, services: ServicesDep, response: Response
) -> ConversationDeleted:
    """Tear down the conversation's sandbox, workspace and files, cancel its approvals
    and forget its executions log. Deleting twice is fine.

    202 with ``"deleted": "pending"`` when an operation still holds the conversation
    past the lease wait: its approvals are cancelled at once, and reconciliation
    finishes the teardown.
    """
    result = ConversationDeleted.model_validate(services.delete_conversation(ctx))
    if result.deleted == "pending":
        response.status_code = 202
    return result
