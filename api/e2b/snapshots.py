"""E2B's snapshot and fork routes: ``Sandbox.create_snapshot``, ``list_snapshots``,
``delete_snapshot`` (E2B deletes the snapshot's template) and ``fork``.

A snapshot keeps the sandbox's files (workspace and installed packages): processes
and memory are never kept, a sandbox made from a snapshot boots afresh on its files.
``mode="full"`` (``memory: true``) is refused with 400 ``snapshot_memory_not_supported``
and the reason; without a mode (E2B's default is a full snapshot) the files are kept.
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api.deps import through_door
from api.e2b.control import (
    MAX_PAGE,
    _json_body,
    _optional_int,
    caller_of,
    handler,
    sandbox_json,
    services_of,
)
from api.e2b.errors import refuse, status_of
from runtime.core.errors import SiestaError
from runtime.core.records import E2bSandbox, SnapshotRecord
from runtime.e2b.snapshots import E2bSnapshots
from runtime.services import Services


def _snapshots(services: Services) -> E2bSnapshots:
    return E2bSnapshots(services.e2b, services.snapshots)


def snapshot_json(record: SnapshotRecord) -> dict[str, Any]:
    return {
        "snapshotID": record.snapshot_id,
        "names": [record.name] if record.name else [record.snapshot_id],
    }


@handler
async def create_snapshot(request: Request) -> Response:
    caller, org = caller_of(request)
    body = await _json_body(request)
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise refuse(400, "name must be a string")
    # ``mode="full"`` sends ``memory: true`` (refused where memory cannot be kept); left
    # out, E2B's default is a full snapshot, here the files alone (see the README).
    memory = body.get("memory", False)
    if not isinstance(memory, bool):
        raise refuse(400, "memory must be a boolean")
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]

    def take() -> SnapshotRecord:
        ctx = services.e2b.context(services.e2b.get(org, sandbox_id))
        with through_door(services, ctx, caller.name, "createSnapshot", {"name": name}):
            return _snapshots(services).take(org, sandbox_id, name or None, memory=memory)

    record = await to_thread.run_sync(take)
    return JSONResponse(snapshot_json(record), status_code=201)


@handler
async def list_snapshots(request: Request) -> Response:
    """Oldest first; filters ``sandboxID`` and ``name``; pages of ``limit`` with the
    next page's token in ``x-next-token``."""
    _, org = caller_of(request)
    services = services_of(request)
    query = request.query_params
    try:
        limit = min(max(int(query.get("limit", MAX_PAGE)), 1), MAX_PAGE)
        start = int(query.get("nextToken") or 0)
    except ValueError as exc:
        raise refuse(400, "limit and nextToken must be whole numbers") from exc
    found = await to_thread.run_sync(
        lambda: _snapshots(services).find(org, query.get("sandboxID"), query.get("name"))
    )
    page = found[start : start + limit]
    headers = {"x-next-token": str(start + limit)} if start + limit < len(found) else {}
    return JSONResponse([snapshot_json(record) for record in page], headers=headers)


@handler
async def delete_template(request: Request) -> Response:
    """Only snapshots are templates one can delete here (the catalog is the operators')."""
    _, org = caller_of(request)
    services = services_of(request)
    template_id = request.path_params["template_id"]
    if not await to_thread.run_sync(lambda: _snapshots(services).delete(org, template_id)):
        raise refuse(404, f"template {template_id} not found (only snapshots can be deleted)")
    return Response(status_code=204)


@handler
async def fork(request: Request) -> Response:
    """One snapshot of the source, then ``count`` sandboxes from it: each one's result
    is a sandbox or an error of its own."""
    caller, org = caller_of(request)
    body = await _json_body(request)
    count = _optional_int(body, "count")
    count = 1 if count is None else count
    services = services_of(request)
    limit = services.settings.snapshots.max_forks_per_call
    if not 1 <= count <= limit:
        msg = f"count must be between 1 and {limit} (SIESTA_SNAPSHOTS__MAX_FORKS_PER_CALL)"
        raise refuse(400, msg)
    timeout = _optional_int(body, "timeout")
    sandbox_id = request.path_params["sandbox_id"]

    def fork() -> list[E2bSandbox | SiestaError]:
        ctx = services.e2b.context(services.e2b.get(org, sandbox_id))
        with through_door(services, ctx, caller.name, "forkSandbox", {"count": count}):
            return _snapshots(services).fork(org, caller.name, sandbox_id, count, timeout)

    made = await to_thread.run_sync(fork)
    results = [
        {"sandbox": sandbox_json(one, services)}
        if isinstance(one, E2bSandbox)
        else {"error": {"code": status_of(one), "message": str(one)}}
        for one in made
    ]
    return JSONResponse(results, status_code=201)


ROUTES = [
    Route("/sandboxes/{sandbox_id}/snapshots", create_snapshot, methods=["POST"]),
    Route("/sandboxes/{sandbox_id}/fork", fork, methods=["POST"]),
    Route("/snapshots", list_snapshots, methods=["GET"]),
    Route("/templates/{template_id}", delete_template, methods=["DELETE"]),
]
