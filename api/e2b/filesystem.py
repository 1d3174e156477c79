"""envd's ``filesystem.Filesystem`` over Connect: stat, list, make, move, remove, watch.

The operations are ``runtime.sandbox.filesystem``'s; this module maps their entries
(with their metadata) and errors to envd's messages and codes (the SDKs read NOT_FOUND as "does not
exist" and ALREADY_EXISTS as "was there already"). The async and JS SDKs watch
through the ``WatchDir`` stream, the sync one through the watcher trio.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, MutableMapping
from dataclasses import replace
from typing import Literal

from anyio import to_thread
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from protobuf import Oneof
from protobuf.wkt import Timestamp

from api.e2b.envd import CALL, EnvdCall
from api.e2b.protocol.filesystem.filesystem_connect import Filesystem
from api.e2b.protocol.filesystem.filesystem_pb import (
    CreateWatcherRequest,
    CreateWatcherResponse,
    EntryInfo,
    EventType,
    FilesystemEvent,
    FileType,
    GetWatcherEventsRequest,
    GetWatcherEventsResponse,
    ListDirRequest,
    ListDirResponse,
    MakeDirRequest,
    MakeDirResponse,
    MoveRequest,
    MoveResponse,
    RemoveRequest,
    RemoveResponse,
    RemoveWatcherRequest,
    RemoveWatcherResponse,
    StatRequest,
    StatResponse,
    WatchDirRequest,
    WatchDirResponse,
)
from api.e2b.rpc import in_thread
from runtime.sandbox import filesystem, watchers
from runtime.sandbox.watchers import Watcher
from runtime.services import Services

FILE_TYPES = {"file": FileType.FILE, "directory": FileType.DIRECTORY}
EVENT_TYPES = {
    "create": EventType.CREATE,
    "write": EventType.WRITE,
    "remove": EventType.REMOVE,
    "rename": EventType.RENAME,
    "chmod": EventType.CHMOD,
}
DROPPED_HEADER = "siesta-watcher-dropped"
LIMIT_HEADER = "siesta-watcher-limit-bytes"
WATCH_KEEPALIVE_SECONDS = 50.0
WATCH_POLL_SECONDS = 0.1
"""How often a WatchDir stream hands on what its watcher collected."""


def entry_info(entry: filesystem.Entry) -> EntryInfo:
    return EntryInfo(
        name=entry.name,
        type=FILE_TYPES.get(entry.kind, FileType.UNSPECIFIED),
        path=entry.path,
        size=entry.size,
        mode=entry.mode,
        permissions=entry.permissions,
        owner=entry.owner,
        group=entry.group,
        modified_time=Timestamp.from_seconds(entry.modified),
        symlink_target=entry.symlink_target,
        is_symlink=entry.is_symlink,
        metadata=dict(entry.metadata),
    )


def change_event(
    change: watchers.Change, entries: dict[str, filesystem.Entry] | None = None
) -> FilesystemEvent:
    found = (entries or {}).get(change.name) if change.kind in filesystem.ENTRY_KINDS else None
    return FilesystemEvent(
        name=change.name,
        type=EVENT_TYPES[change.kind],
        entry=entry_info(found) if found is not None else None,
    )


def _say_dropped(headers: MutableMapping[str, str], taken: watchers.Changes) -> None:
    """envd's messages have no place for lost changes: headers (trailers of a stream)
    say how many were lost past the watcher's limit, for a client that looks."""
    headers[DROPPED_HEADER] = str(taken.dropped)
    headers[LIMIT_HEADER] = str(taken.limit_bytes)


class FilesystemService(Filesystem):
    def __init__(self, services: Callable[[], Services]) -> None:
        self._get_services = services

    def _services(self) -> Services:
        return self._get_services()

    @property
    def _fs(self) -> filesystem.SandboxFilesystem:
        return self._get_services().filesystem

    async def stat(
        self, request: StatRequest, ctx: RequestContext[StatRequest, StatResponse]
    ) -> StatResponse:
        call = CALL.get()
        entry = await in_thread(
            lambda: call.at_door(
                self._services(),
                "statPath",
                {"path": request.path},
                lambda: self._fs.stat(call.who, request.path),
            )
        )
        return StatResponse(entry=entry_info(entry))

    async def list_dir(
        self, request: ListDirRequest, ctx: RequestContext[ListDirRequest, ListDirResponse]
    ) -> ListDirResponse:
        call = CALL.get()
        depth = request.depth or 1
        entries = await in_thread(
            lambda: call.at_door(
                self._services(),
                "listDirectory",
                {"path": request.path, "depth": depth},
                lambda: self._fs.list_dir(call.who, request.path, depth),
            )
        )
        return ListDirResponse(entries=[entry_info(entry) for entry in entries])

    async def make_dir(
        self, request: MakeDirRequest, ctx: RequestContext[MakeDirRequest, MakeDirResponse]
    ) -> MakeDirResponse:
        call = CALL.get()
        entry = await in_thread(
            lambda: call.at_door(
                self._services(),
                "makeDirectory",
                {"path": request.path},
                lambda: self._fs.make_dir(call.who, request.path),
            )
        )
        return MakeDirResponse(entry=entry_info(entry))

    async def move(
        self, request: MoveRequest, ctx: RequestContext[MoveRequest, MoveResponse]
    ) -> MoveResponse:
        call = CALL.get()
        entry = await in_thread(
            lambda: call.at_door(
                self._services(),
                "movePath",
                {"source": request.source, "destination": request.destination},
                lambda: self._fs.move(call.who, request.source, request.destination),
            )
        )
        return MoveResponse(entry=entry_info(entry))

    async def remove(
        self, request: RemoveRequest, ctx: RequestContext[RemoveRequest, RemoveResponse]
    ) -> RemoveResponse:
        call = CALL.get()
        await in_thread(
            lambda: call.at_door(
                self._services(),
                "removePath",
                {"path": request.path},
                lambda: self._fs.remove(call.who, request.path),
            )
        )
        return RemoveResponse()

    async def create_watcher(
        self,
        request: CreateWatcherRequest,
        ctx: RequestContext[CreateWatcherRequest, CreateWatcherResponse],
    ) -> CreateWatcherResponse:
        call = CALL.get()
        watcher = await in_thread(lambda: self._watch(call, request))
        return CreateWatcherResponse(watcher_id=watcher.id)

    def _watch(self, call: EnvdCall, request: CreateWatcherRequest | WatchDirRequest) -> Watcher:
        return call.at_door(
            self._services(),
            "watchDirectory",
            {"path": request.path, "recursive": request.recursive},
            lambda: self._fs.create_watcher(
                call.who,
                request.path,
                request.recursive,
                include_entry=request.include_entry,
                allow_network_mounts=request.allow_network_mounts,
            ),
        )

    def _take(
        self, call: EnvdCall, watcher: Watcher
    ) -> tuple[watchers.Changes, list[FilesystemEvent]]:
        """The watcher's new changes, as envd's events (with their entries, when asked)."""
        taken = watcher.take()
        entries = self._fs.event_entries(call.who, watcher, taken.changes)
        return taken, [change_event(change, entries) for change in taken.changes]

    async def get_watcher_events(
        self,
        request: GetWatcherEventsRequest,
        ctx: RequestContext[GetWatcherEventsRequest, GetWatcherEventsResponse],
    ) -> GetWatcherEventsResponse:
        call = CALL.get()
        watcher = await in_thread(lambda: self._fs.watcher(call.who, request.watcher_id))
        taken, events = await in_thread(lambda: self._take(call, watcher))
        if not taken.changes and watcher.failure:
            raise ConnectError(Code.NOT_FOUND, f"the watch ended: {watcher.failure}")
        if taken.dropped:
            _say_dropped(ctx.response_headers, taken)
        return GetWatcherEventsResponse(events=events)

    async def remove_watcher(
        self,
        request: RemoveWatcherRequest,
        ctx: RequestContext[RemoveWatcherRequest, RemoveWatcherResponse],
    ) -> RemoveWatcherResponse:
        call = CALL.get()
        await in_thread(lambda: self._fs.remove_watcher(call.who, request.watcher_id))
        return RemoveWatcherResponse()

    async def watch_dir(
        self, request: WatchDirRequest, ctx: RequestContext[WatchDirRequest, WatchDirResponse]
    ) -> AsyncIterator[WatchDirResponse]:
        call = CALL.get()
        watcher = await in_thread(lambda: self._watch(call, request))
        try:
            start: Oneof[Literal["start"], WatchDirResponse.StartEvent] = Oneof(
                "start", WatchDirResponse.StartEvent()
            )
            yield WatchDirResponse(event=start)
            quiet = 0.0
            dropped = 0
            while True:
                await asyncio.sleep(WATCH_POLL_SECONDS)
                taken, events = await in_thread(lambda: self._take(call, watcher))
                changes = taken.changes
                if taken.dropped:
                    dropped += taken.dropped
                    _say_dropped(ctx.response_trailers, replace(taken, dropped=dropped))
                for one in events:
                    event: Oneof[Literal["filesystem"], FilesystemEvent] = Oneof("filesystem", one)
                    yield WatchDirResponse(event=event)
                if watcher.failure and not changes:
                    raise ConnectError(Code.NOT_FOUND, f"the watch ended: {watcher.failure}")
                quiet = 0.0 if changes else quiet + WATCH_POLL_SECONDS
                if quiet >= WATCH_KEEPALIVE_SECONDS:
                    quiet = 0.0
                    keepalive: Oneof[Literal["keepalive"], WatchDirResponse.KeepAlive] = Oneof(
                        "keepalive", WatchDirResponse.KeepAlive()
                    )
                    yield WatchDirResponse(event=keepalive)
        finally:
            await to_thread.run_sync(lambda: self._fs.remove_watcher(call.who, watcher.id))
