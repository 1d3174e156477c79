"""A conversation's sandbox as a resource: inspect it, tear it down."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from api.deps import Authenticated, ContextDep, ServicesDep
from runtime.errors import NotFound

router = APIRouter(prefix="/v1/conversations", tags=["conversations"], dependencies=Authenticated)


@router.get("/{conversation_id}/sandbox")
def describe_sandbox(ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    record = services.sessions.describe(ctx)
    if record is None:
        msg = f"conversation {ctx.conversation!r} has no sandbox session"
        raise NotFound(msg)
    return {
        "sessionId": record.session_id,
        "imageId": record.image_id,
        "imageRef": record.image_ref,
        "status": record.status.value,
        "state": services.sessions.sandbox_state(record).value,
        "createdAt": record.created_at,
        "lastUsedAt": record.last_used_at,
        "generation": record.generation,
    }


@router.delete("/{conversation_id}")
def delete_conversation(
    ctx: ContextDep, services: ServicesDep, response: Response
) -> dict[str, Any]:
    """Tear down the conversation's sandbox, workspace and files. Deleting twice is fine.

    202 with ``"deleted": "pending"`` when an operation still holds the conversation
    past the lease wait: reconciliation finishes the teardown.
    """
    result = services.delete_conversation(ctx)
    if result["deleted"] == "pending":
        response.status_code = 202
    return result
