"""Snapshots of a conversation's sandbox, forks, and conversations started from a
snapshot: the ``sandbox`` scope.

A snapshot keeps the sandbox's workspace and what was installed outside it; running
processes and memory are not kept (``keepMemory`` is refused: 422
``snapshot_memory_not_supported``, with the provider's reason). Snapshots belong to
the org (``X-Siesta-Org``): another org's answer 404 as if they did not exist. A
conversation started from one (or a fork) is the caller's new conversation, a session
like any first one.
"""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Header, Query, Response

from siesta_contract.errors import ErrorBody
from siesta_contract.snapshots import (
    ConversationFromSnapshot,
    ConversationStarted,
    ForkCreate,
    ForkOutcome,
    ForkPublic,
    ForksCreate,
    ForksPublic,
    SnapshotCreate,
    SnapshotPublic,
    SnapshotsPublic,
)

from api.deps import CallerDep, ContextDep, OrgDep, ServicesDep, requires, through_door
from api.responses import CONVERSATION, error_responses
from runtime.core.context import CallContext
from runtime.core.errors import MissingContext, SiestaError
from runtime.core.records import SessionRecord, SnapshotRecord
from runtime.images.catalog import split_selection
from runtime.sandbox.snapshots.service import Fork

FAILURES = (*CONVERSATION, 404, 409, 501, 504)

conversations = APIRouter(
    prefix="/v1/conversations/{conversation_id}",
    tags=["snapshots"],
    dependencies=requires("sandbox"),
    responses=error_responses(*FAILURES),
)
router = APIRouter(
    prefix="/v1/snapshots",
    tags=["snapshots"],
    dependencies=requires("sandbox"),
    responses=error_responses(*FAILURES),
)


@conversations.post("/snapshots", status_code=201)
async def take_snapshot(
    body: SnapshotCreate, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> SnapshotPublic:
    """Keep the sandbox's files as they are now: the workspace and what was installed
    outside it (processes are not kept). The sandbox is frozen while its files are
    copied and runs on afterwards. 404 ``no_sandbox`` when the conversation has none;
    409 ``snapshot_limit_reached`` at the org's limit."""
    shown = {"name": body.name}

    def take() -> SnapshotRecord:
        with through_door(services, ctx, caller.name, "createSnapshot", shown) as entry:
            record = services.snapshots.take(
                ctx, body.name, body.metadata, keep_memory=body.keepMemory
            )
            entry.result = {"snapshotId": record.snapshot_id}
        return record

    return public(await to_thread.run_sync(take))


@conversations.post("/fork", status_code=201)
async def fork(
    body: ForkCreate, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> ForkPublic:
    """A new conversation ``conversationId`` whose sandbox starts from this one's files
    as they are now; this one keeps running. 409 ``conversation_exists`` when the new
    conversation has a sandbox already."""
    shown = {"conversationId": body.conversationId}

    def fork() -> Fork:
        with through_door(services, ctx, caller.name, "forkSandbox", shown):
            return services.snapshots.fork(ctx, [body.conversationId], keep_memory=body.keepMemory)

    made = await to_thread.run_sync(fork)
    session = made.sessions[0]
    if isinstance(session, SiestaError):
        raise session
    return ForkPublic(
        **started(session).model_dump(),
        sourceConversationId=ctx.conversation,
        snapshotSeconds=round(made.snapshot_seconds, 3),
        startSeconds=round(made.start_seconds, 3),
    )


@conversations.post("/forks", status_code=201)
async def forks(
    body: ForksCreate, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> ForksPublic:
    """Several new conversations from this one's files as they are now, with one
    snapshot (one freeze); this one keeps running. Each fork starts or fails on its own:
    a failed one answers its ``error`` (``conversation_exists``, a capacity limit) in
    the list; 422 ``invalid_request`` beyond ``SIESTA_SNAPSHOTS__MAX_FORKS_PER_CALL``."""
    shown = {"conversationIds": body.conversationIds}

    def fork() -> Fork:
        with through_door(services, ctx, caller.name, "forkSandbox", shown):
            return services.snapshots.fork(ctx, body.conversationIds, keep_memory=body.keepMemory)

    made = await to_thread.run_sync(fork)
    outcomes = [
        ForkOutcome(conversationId=conversation, error=ErrorBody(**session.to_dict()))
        if isinstance(session, SiestaError)
        else ForkOutcome(conversationId=conversation, started=started(session))
        for conversation, session in zip(body.conversationIds, made.sessions, strict=True)
    ]
    return ForksPublic(
        sourceConversationId=ctx.conversation,
        snapshotSeconds=round(made.snapshot_seconds, 3),
        startSeconds=round(made.start_seconds, 3),
        forks=outcomes,
    )


@router.get("")
async def list_snapshots(
    services: ServicesDep,
    org: OrgDep,
    conversation_id: Annotated[str | None, Query(alias="conversationId")] = None,
) -> SnapshotsPublic:
    """The org's snapshots, oldest first (``conversationId``: those of one conversation)."""
    found = await to_thread.run_sync(lambda: services.snapshots.list(org, conversation_id))
    return SnapshotsPublic(snapshots=[public(record) for record in found])


@router.get("/{snapshot_id}")
async def get_snapshot(snapshot_id: str, services: ServicesDep, org: OrgDep) -> SnapshotPublic:
    return public(await to_thread.run_sync(lambda: services.snapshots.get(org, snapshot_id)))


@router.delete("/{snapshot_id}", status_code=204)
async def delete_snapshot(snapshot_id: str, services: ServicesDep, org: OrgDep) -> Response:
    """Delete the snapshot's image and workspace copy. Sandboxes started from it keep
    running: each has its own copy."""
    await to_thread.run_sync(lambda: services.snapshots.delete(org, snapshot_id))
    return Response(status_code=204)


@router.post("/{snapshot_id}/conversations", status_code=201)
async def start_conversation(
    snapshot_id: str,
    body: ConversationFromSnapshot,
    services: ServicesDep,
    org: OrgDep,
    caller: CallerDep,
    x_siesta_user: Annotated[str | None, Header()] = None,
    x_siesta_base_image: Annotated[str | None, Header()] = None,
) -> ConversationStarted:
    """A new conversation ``conversationId`` (the caller's: ``X-Siesta-User``) whose
    sandbox starts from the snapshot. 409 ``conversation_exists`` when it has a sandbox."""
    user = caller.user_for(x_siesta_user)
    if not user:
        msg = "starting a conversation needs the X-Siesta-User header"
        raise MissingContext(msg, headers=["X-Siesta-User"])
    ctx = CallContext(
        org=org,
        user=user,
        conversation=body.conversationId,
        base_image=x_siesta_base_image or None,
    )
    shown = {"snapshotId": snapshot_id}

    def start() -> SessionRecord:
        with through_door(services, ctx, caller.name, "startFromSnapshot", shown):
            return services.snapshots.start(ctx, snapshot_id)

    return started(await to_thread.run_sync(start))


def public(record: SnapshotRecord) -> SnapshotPublic:
    return SnapshotPublic(
        snapshotId=record.snapshot_id,
        conversationId=record.conversation,
        imageId=split_selection(record.image_id)[0],
        name=record.name,
        metadata=record.metadata,
        createdBy=record.owner,
        createdAt=record.created_at,
        workspaceBytes=record.workspace_bytes,
        workspaceAllocatedBytes=record.workspace_allocated_bytes,
        imageBytes=record.image_bytes,
        copyOnWrite=record.copy_on_write,
    )


def started(session: SessionRecord) -> ConversationStarted:
    return ConversationStarted(
        conversationId=session.conversation,
        sessionId=session.session_id,
        imageId=split_selection(session.image_id)[0],
        createdAt=session.created_at,
    )
