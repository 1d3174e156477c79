"""Sandboxes: the session records filtered, one conversation's in detail, and the
suspend, resume and delete actions, each confirmed first. The actions go through the
services the API's routes use (``api/routes/tiers.py``, ``api/routes/conversations.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from anyio import to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console.audit_hook import record_action
from api.console.auth import ActionSession, PageSession, source_of
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep
from api.errors import status_for
from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.core.operator_records import ConsoleSession
from runtime.core.records import ExecutionFilter, SessionRecord
from runtime.images.catalog import split_selection
from runtime.services import Services

Action = Literal["suspend", "resume", "delete"]
ACTIONS: dict[str, tuple[str, str]] = {
    "suspend": (
        "Suspend",
        "Freeze its processes now, memory kept (the pause tier). "
        "Its next call, or Resume, brings it back.",
    ),
    "resume": ("Resume", "Bring it back to running now, as its next call would."),
    "delete": (
        "Delete",
        "Tear down its sandbox, workspace and files, cancel its "
        "approvals and forget its executions log. This cannot be undone.",
    ),
}
RECENT_EXECUTIONS = 10

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
Filter = Annotated[str, Query(max_length=200)]


@router.get(f"{PREFIX}/sandboxes")
def sandboxes(
    services: ServicesDep,
    session: PageSession,
    org: Filter = "",
    user: Filter = "",
    conversation: Filter = "",
    image: Filter = "",
    state: Filter = "",
    done: Filter = "",
    target: Filter = "",
) -> HTMLResponse:
    wanted = {"org": org, "user": user, "conversation": conversation, "image": image}
    wanted["state"] = state
    records = [record for record in services.fleet.records() if _matches(record, wanted)]
    records.sort(key=lambda record: -record.last_used_at)
    return render(
        session,
        "sandboxes.html",
        page="sandboxes",
        records=records,
        filters=wanted,
        done="deleted" if done == "delete" and target else "",
        target=target,
    )


def _matches(record: SessionRecord, wanted: dict[str, str]) -> bool:
    """Every filter given holds; an image filter finds ``id`` (every version) or ``id:tag``."""
    values = {
        "org": {record.org},
        "user": {record.user},
        "conversation": {record.conversation},
        "image": {record.image_id, split_selection(record.image_id)[0]},
        "state": {record.status.value},
    }
    return all(not want.strip() or want.strip() in values[name] for name, want in wanted.items())


@router.get(f"{PREFIX}/sandboxes/{{org}}/{{conversation_id}}")
def sandbox(
    org: str,
    conversation_id: str,
    services: ServicesDep,
    session: PageSession,
    done: Filter = "",
) -> HTMLResponse:
    record = services.fleet.record(org, conversation_id)
    if record is None:
        return _missing(session, org, conversation_id)
    state = "not known"
    with contextlib.suppress(SiestaError):
        state = services.sessions.sandbox_state(record).value
    executions = services.tools.find(
        org, ExecutionFilter(conversation=conversation_id, limit=RECENT_EXECUTIONS)
    )
    return render(
        session,
        "sandbox.html",
        page="sandboxes",
        record=record,
        state=state,
        usage=services.fleet.usage(record),
        executions=executions,
        done=ACTIONS[done][0] if done in ACTIONS else "",
    )


@router.get(f"{PREFIX}/sandboxes/{{org}}/{{conversation_id}}/{{action}}")
def confirm(
    org: str, conversation_id: str, action: Action, services: ServicesDep, session: PageSession
) -> HTMLResponse:
    record = services.fleet.record(org, conversation_id)
    if record is None:
        return _missing(session, org, conversation_id)
    label, effect = ACTIONS[action]
    return render(
        session,
        "confirm.html",
        page="sandboxes",
        record=record,
        action=action,
        label=label,
        effect=effect,
        error=None,
    )


@router.post(f"{PREFIX}/sandboxes/{{org}}/{{conversation_id}}/{{action}}")
async def act(
    request: Request,
    org: str,
    conversation_id: str,
    action: Action,
    services: ServicesDep,
    session: ActionSession,
) -> Response:
    record = await to_thread.run_sync(services.fleet.record, org, conversation_id)
    if record is None:
        return _missing(session, org, conversation_id)
    target, source = f"{org}/{conversation_id}", source_of(request)
    perform = _performer(services, record, action)
    try:
        outcome = await to_thread.run_sync(perform)
    except SiestaError as error:
        record_action(
            services,
            session.token_name,
            f"sandbox.{action}",
            target,
            source=source,
            details={"ok": False, "error": error.code},
        )
        label, effect = ACTIONS[action]
        return render(
            session,
            "confirm.html",
            page="sandboxes",
            status=status_for(error),
            record=record,
            action=action,
            label=label,
            effect=effect,
            error=error,
        )
    record_action(
        services,
        session.token_name,
        f"sandbox.{action}",
        target,
        source=source,
        details={"ok": True, **outcome},
    )
    if action == "delete":
        query = urlencode({"done": "delete", "target": target})
        return RedirectResponse(f"{PREFIX}/sandboxes?{query}", 303)
    return RedirectResponse(f"{PREFIX}/sandboxes/{quote(target)}?done={action}", 303)


def _performer(
    services: Services, record: SessionRecord, action: str
) -> Callable[[], dict[str, Any]]:
    """The API route's own service call for ``action``, on the record's conversation."""
    ctx = CallContext(
        org=record.org, user=record.user or "console", conversation=record.conversation
    )
    if action == "delete":
        return lambda: dict(services.delete_conversation(ctx))

    def tier() -> dict[str, Any]:
        if action == "suspend":
            change = services.tiers.pause(ctx, keep_memory=True)
        else:
            change = services.tiers.resume(ctx)
        return {"state": change.state.value, "changed": change.changed}

    return tier


def _missing(session: ConsoleSession, org: str, conversation: str) -> HTMLResponse:
    return render(
        session,
        "missing.html",
        page="sandboxes",
        status=404,
        what=f"No sandbox session for the conversation {org}/{conversation}.",
    )
