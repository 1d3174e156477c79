"""A conversation's sandbox file system beyond the workspace functions: stat, list
with depth, make folders, move, remove, files' metadata, and watchers of folders.

The operations are ``runtime.sandbox.filesystem``'s, the same that serve E2B's
``filesystem.Filesystem``: small programs run in the sandbox as the call's user
(default ``root``), relative paths from the workspace. A watcher is inotify in the
sandbox, kept by this instance (as E2B's are): its changes are read by polling, with
a wait, or as a stream of events.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from siesta_contract.filesystem import (
    FsChange,
    FsChanges,
    FsEntries,
    FsEntry,
    FsListArgs,
    FsMetadataArgs,
    FsMoveArgs,
    FsPathArgs,
    FsWatchArgs,
    FsWatcher,
)
from siesta_contract.text import WORKSPACE

from api.deps import CallerDep, ContextDep, ServicesDep, requires, through_door
from api.responses import SANDBOX, error_responses
from api.streaming import KEEPALIVE, SSE_CONTENT
from runtime.core.auth import Caller
from runtime.core.context import CallContext
from runtime.core.errors import NotFound
from runtime.core.records import ToolExecution
from runtime.sandbox.filesystem import ENTRY_KINDS, Entry
from runtime.sandbox.user_files import AsUser
from runtime.sandbox.watchers import Change, Changes, Watcher
from runtime.services import Services

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox/fs",
    tags=["filesystem"],
    dependencies=requires("shell"),
    responses=error_responses(*SANDBOX, 507),
)
WATCH_POLL_SECONDS = 0.1
"""How often a read of a watcher looks at what it collected."""
MAX_WAIT_SECONDS = 30
"""The longest a read of a watcher waits for a first change."""


class WatchEnded(NotFound):
    code = "watch_ended"


def _as(ctx: CallContext, user: str | None) -> AsUser:
    return AsUser(ctx, user or "root", WORKSPACE)


def _entry(entry: Entry) -> FsEntry:
    return FsEntry(
        name=entry.name,
        path=entry.path,
        type="file"
        if entry.kind == "file"
        else "directory"
        if entry.kind == "directory"
        else "other",
        size=entry.size,
        mode=entry.mode,
        permissions=entry.permissions,
        owner=entry.owner,
        group=entry.group,
        modifiedAt=entry.modified,
        symlinkTarget=entry.symlink_target,
        metadata=entry.metadata,
    )


@router.post("/stat", response_model=FsEntry)
def stat(body: FsPathArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep) -> FsEntry:
    """What is at ``path`` (a symlink itself, not what it points to)."""
    with _door(services, ctx, caller, "statPath", body):
        return _entry(services.filesystem.stat(_as(ctx, body.user), body.path))


@router.post("/list", response_model=FsEntries)
def list_dir(
    body: FsListArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> FsEntries:
    """The entries under a folder, ``depth`` levels down."""
    with _door(services, ctx, caller, "listDirectory", body):
        found = services.filesystem.list_dir(_as(ctx, body.user), body.path, body.depth)
    return FsEntries(entries=[_entry(entry) for entry in found])


@router.post("/mkdir", status_code=201, response_model=FsEntry)
def make_dir(
    body: FsPathArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> FsEntry:
    """Make a folder and those on the way (``already_exists`` when it exists)."""
    with _door(services, ctx, caller, "makeDirectory", body):
        return _entry(services.filesystem.make_dir(_as(ctx, body.user), body.path))


@router.post("/move", response_model=FsEntry)
def move(body: FsMoveArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep) -> FsEntry:
    """Rename or move a file or folder; answers what is at the destination."""
    who = _as(ctx, body.user)
    with _door(services, ctx, caller, "movePath", body):
        return _entry(services.filesystem.move(who, body.source, body.destination))


@router.post("/remove", status_code=204, response_class=Response)
def remove(body: FsPathArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep) -> Response:
    """Remove a file or a folder with everything in it (nothing there: fine)."""
    with _door(services, ctx, caller, "removePath", body):
        services.filesystem.remove(_as(ctx, body.user), body.path)
    return Response(status_code=204)


@router.post("/metadata", response_model=FsEntry)
def set_metadata(
    body: FsMetadataArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> FsEntry:
    """Replace a file's metadata (``user.e2b.*`` extended attributes, E2B's file
    metadata); answers the file with what it now has."""
    who = _as(ctx, body.user)
    with _door(services, ctx, caller, "setMetadata", body):
        return _entry(services.filesystem.set_metadata(who, body.path, body.metadata))


@router.post("/watchers", status_code=201, response_model=FsWatcher)
def create_watcher(
    body: FsWatchArgs, ctx: ContextDep, services: ServicesDep, caller: CallerDep
) -> FsWatcher:
    """Watch a folder (and, ``recursive``, every folder under it, those made later too):
    its changes from now on are kept until read. A watcher nobody reads for five
    minutes is stopped."""
    who = _as(ctx, body.user)
    with _door(services, ctx, caller, "watchDirectory", body):
        watcher = services.filesystem.create_watcher(
            who,
            body.path,
            body.recursive,
            include_entry=body.includeEntry,
            allow_network_mounts=body.allowNetworkMounts,
        )
    return FsWatcher(id=watcher.id, path=body.path)


def _door(
    services: Services, ctx: CallContext, caller: Caller, function: str, body: BaseModel
) -> AbstractContextManager[ToolExecution]:
    """The route's call at the door, its body (paths, never contents) in the log."""
    shown = body.model_dump(mode="json", exclude_none=True)
    return through_door(services, ctx, caller.name, function, shown)


@router.get(
    "/watchers/{watcher_id}",
    response_model=FsChanges,
    responses={
        200: {
            "description": "The changes since the last read. With `Accept: "
            "text/event-stream`: one `change` event per change from now on "
            '(`{"type", "name", "entry"}`), `dropped` (`{"dropped", "limitBytes"}`) when changes '
            'were lost past the watcher\'s limit, `end` (`{"code", "message"}`) if the '
            "watch stops; "
            "closing the stream leaves the watcher (delete it to stop watching).",
            "content": SSE_CONTENT,
        }
    },
)
async def read_watcher(
    watcher_id: str,
    ctx: ContextDep,
    services: ServicesDep,
    request: Request,
    wait_seconds: Annotated[int, Query(alias="waitSeconds", ge=0, le=MAX_WAIT_SECONDS)] = 0,
) -> FsChanges | StreamingResponse:
    """What changed since the last read; ``waitSeconds``: wait up to that long for a
    first change when there is none yet."""
    # Off the event loop: a watcher another instance made is asked of the sandbox.
    watcher = await to_thread.run_sync(
        lambda: services.filesystem.watcher(_as(ctx, None), watcher_id)
    )
    if "text/event-stream" in request.headers.get("accept", ""):
        stream = _events(services, _as(ctx, None), watcher)
        return StreamingResponse(stream, media_type="text/event-stream")
    deadline = time.monotonic() + wait_seconds
    taken = await to_thread.run_sync(watcher.take)
    while not _any(taken) and not watcher.failure and time.monotonic() < deadline:
        await asyncio.sleep(WATCH_POLL_SECONDS)
        taken = await to_thread.run_sync(watcher.take)
    if not _any(taken) and watcher.failure:
        msg = f"the watch ended: {watcher.failure}"
        raise WatchEnded(msg, watcher=watcher_id)
    changes = await to_thread.run_sync(_changes, services, _as(ctx, None), watcher, taken)
    return FsChanges(changes=changes, dropped=taken.dropped, limitBytes=taken.limit_bytes)


def _any(taken: Changes) -> bool:
    return bool(taken.changes or taken.dropped)


@router.delete("/watchers/{watcher_id}", status_code=204, response_class=Response)
def delete_watcher(watcher_id: str, ctx: ContextDep, services: ServicesDep) -> Response:
    """Stop watching."""
    services.filesystem.remove_watcher(_as(ctx, None), watcher_id)
    return Response(status_code=204)


def _changes(services: Services, who: AsUser, watcher: Watcher, taken: Changes) -> list[FsChange]:
    """The changes, each with its entry when the watcher was made to include them."""
    entries = services.filesystem.event_entries(who, watcher, taken.changes)
    return [_change(change, entries.get(change.name)) for change in taken.changes]


def _change(change: Change, entry: Entry | None = None) -> FsChange:
    shown = _entry(entry) if entry is not None and change.kind in ENTRY_KINDS else None
    return FsChange.model_validate({"type": change.kind, "name": change.name, "entry": shown})


async def _events(services: Services, who: AsUser, watcher: Watcher) -> AsyncIterator[str]:
    keepalive = services.settings.http.sse_keepalive_seconds
    quiet = 0.0
    while True:
        taken = await to_thread.run_sync(watcher.take)
        for change in await to_thread.run_sync(_changes, services, who, watcher, taken):
            yield f"event: change\ndata: {change.model_dump_json()}\n\n"
        if taken.dropped:
            dropped = {"dropped": taken.dropped, "limitBytes": taken.limit_bytes}
            yield f"event: dropped\ndata: {json.dumps(dropped)}\n\n"
        changes = _any(taken)
        if watcher.failure and not changes:
            ended = {"code": "watch_ended", "message": f"the watch ended: {watcher.failure}"}
            yield f"event: end\ndata: {json.dumps(ended)}\n\n"
            return
        quiet = 0.0 if changes else quiet + WATCH_POLL_SECONDS
        if quiet >= keepalive:
            quiet = 0.0
            yield KEEPALIVE
        await asyncio.sleep(WATCH_POLL_SECONDS)
