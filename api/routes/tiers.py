"""Pausing and resuming a conversation's sandbox on request (``runtime.sandbox.tiers``).

A pause holds the conversation like any call: it waits for the call in flight
(``session_busy`` past the lease wait) and never cuts one short. The conversation's
next call resumes the sandbox anyway (its answer says ``"resumed"``); ``resume``
does only that, ahead of time.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter

from siesta_contract.metrics import SandboxPauseArgs, SandboxTierPublic

from api.deps import ContextDep, ServicesDep, requires
from api.responses import CONVERSATION, error_responses
from runtime.sandbox.tiers import TierChange

PAUSE_DEFAULTS = SandboxPauseArgs()
"""Without a body: the memory kept."""

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox",
    tags=["sandbox"],
    dependencies=requires("sandbox"),
    responses=error_responses(*CONVERSATION, 404, 409, 504),
)


@router.post("/pause")
async def pause_sandbox(
    ctx: ContextDep, services: ServicesDep, body: SandboxPauseArgs = PAUSE_DEFAULTS
) -> SandboxTierPublic:
    """Pause the sandbox now: processes frozen and memory kept, or with ``keepMemory:
    false`` stopped (processes ended, disk kept). Pausing a paused or stopped sandbox
    changes nothing (``changed: false``). Left paused, the idle tiers stop it after
    ``SIESTA_LIFECYCLE__STOP_AFTER_SECONDS``."""
    keep_memory = body.keepMemory
    change = await to_thread.run_sync(lambda: services.tiers.pause(ctx, keep_memory=keep_memory))
    return public_tier(change)


@router.post("/resume")
async def resume_sandbox(ctx: ContextDep, services: ServicesDep) -> SandboxTierPublic:
    """Bring the sandbox back to running now (from paused: at once, processes kept;
    from stopped: started again, processes gone)."""
    change = await to_thread.run_sync(lambda: services.tiers.resume(ctx))
    return public_tier(change)


def public_tier(change: TierChange) -> SandboxTierPublic:
    return SandboxTierPublic(
        state=change.state.value,
        changed=change.changed,
        resumed=change.resumed,
    )
