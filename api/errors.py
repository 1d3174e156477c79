"""The one place where errors become HTTP responses.

Clients see ``{"error": {"code", "message", ...fields}}`` with a stable code,
never a traceback or a class path.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope
from starlette.websockets import WebSocket

from api.limits import BodyTooLarge, too_large_body
from runtime.core.errors import (
    Forbidden,
    HttpError,
    InvalidJson,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    SiestaError,
)

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[str, int] = {
    "invalid_request": 422,
    "invalid_json": 400,
    "invalid_command": 422,
    "command_too_large": 422,
    "invalid_conversation_id": 400,
    "invalid_context": 400,
    "missing_context": 400,
    "request_too_large": 413,
    "unauthorized": 401,
    "forbidden": 403,
    "forbidden_scope": 403,
    "org_not_allowed": 403,
    "user_not_allowed": 403,
    "self_approval_not_allowed": 403,
    "network_rule_outside_allowlist": 403,  # a sandbox's rules only narrow the deployment's
    "not_found": 404,
    "sandbox_not_found": 404,  # a conversation without a sandbox (metrics, pause)
    "method_not_allowed": 405,
    "invalid_file_name": 422,
    "sandbox_disabled": 403,
    "image_required": 422,
    "image_not_in_catalog": 422,
    "image_retired": 422,  # the selection names a retired image
    "catalog_image_not_found": 404,
    "catalog_image_exists": 409,
    "catalog_image_state_conflict": 409,  # e.g. building or enabling a retired image
    "image_build_running": 409,
    # A build writes only siesta-catalog/<id>:<tag>: the name given conflicts with that
    # (not 422: the request is schema-valid, and the document cannot say the rule).
    "image_name_outside_catalog": 409,
    "dockerfile_not_allowed": 422,  # an inline Dockerfile's ADD
    "image_unavailable": 503,
    "provisioning_failed": 503,
    "provisioning_timeout": 504,
    "provider_unavailable": 503,
    "sandbox_unavailable": 503,
    "sandbox_broken": 503,
    "invalid_path": 422,
    "path_outside_workspace": 422,
    "file_not_found": 404,
    "not_a_file": 404,  # no file at the path (a folder is), as file_not_found
    "not_a_directory": 404,
    "already_exists": 409,  # a folder to make is there
    "permission_denied": 403,  # the sandbox's user may not touch the path
    "unknown_user": 404,  # no such user in the sandbox's image
    "not_enough_space": 507,
    "file_operation_failed": 409,  # the sandbox's state refused it (e.g. a mount point)
    "transfer_too_large": 413,
    "missing_input": 404,  # a conversation file the call names does not exist
    "session_busy": 409,
    "offset_past_end": 409,  # the file as it is now is shorter
    "invalid_idempotency_key": 400,
    "invalid_header": 400,  # bytes a header cannot hold (a token that is not ASCII)
    "idempotency_key_reused": 409,  # a conflict with what an earlier request left
    "idempotency_result_not_kept": 409,
    "outcome_unknown": 409,
    "resume_timeout": 504,
    "metrics_not_supported": 501,
    "lease_expired": 409,
    "capacity_unavailable": 503,
    "port_not_listening": 502,  # nothing in the sandbox listens on the port
    "port_connection_lost": 502,  # the server in the sandbox broke off or spoke no HTTP
    "port_message_too_large": 502,  # limit: a WebSocket message (or refusal) from the sandbox
    "port_sandbox_not_found": 404,
    "too_many_port_connections": 503,
    "state_unavailable": 503,
    "js_unavailable": 503,
    "approval_required": 202,  # a direct route's call, held until a person decides
    "function_not_available": 403,  # a direct route's function the deployment disabled
    "approval_already_decided": 409,
    "approval_expired": 410,
    "approval_cancelled": 410,  # its conversation was deleted
    "snapshot_limit_reached": 409,  # limit: the org's snapshots
    "agent_limit_reached": 409,  # limit: the org's registered agents
    "conversation_exists": 409,  # a fork or a start from a snapshot names one in use
    "snapshots_not_supported": 501,  # the provider cannot (Kubernetes)
    # The provider keeps files only (reason). A 4xx, not 501: the request asks for what
    # this deployment does not do; nothing failed on the server's side.
    "snapshot_memory_not_supported": 422,
    "memory_limit_reached": 409,  # limit: the org's banks or a key's entries
    "knowledge_limit_reached": 409,  # limit: the org's bases, a base's versions or passages
    "document_too_large": 413,  # limit: a document's bytes
    "url_documents_off": 409,  # no SIESTA_EGRESS__ALLOW: documents by URL have nowhere to go
    "secret_limit_reached": 409,  # limit: the org's secrets
    "secrets_not_configured": 409,  # no SIESTA_EGRESS__SECRETS_KEY
    "cancelled": 499,  # nginx's "client closed request": logged, never read
}
# Codes not listed take the status of their class.
STATUS_BY_CLASS: tuple[tuple[type[SiestaError], int], ...] = (
    (InvalidRequest, 422),
    (NotFound, 404),
    (Forbidden, 403),
)


def status_for(error: SiestaError) -> int:
    if error.code in STATUS_BY_CODE:
        return STATUS_BY_CODE[error.code]
    return next((status for cls, status in STATUS_BY_CLASS if isinstance(error, cls)), 500)


def error_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": body}, status_code=status, headers=headers)


# The server closes the connection after refusing an upgrade; saying so keeps a
# client from sending its next request down a socket about to be reset.
REFUSED_UPGRADE_HEADERS = {"Connection": "close"}


async def refuse_websocket(
    websocket: WebSocket, error: SiestaError, close_code: int = 1011
) -> None:
    """The error as the upgrade's answer (its status and body), or a close frame
    when the server cannot answer an upgrade with a response."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        status = status_for(error)
        headers = {**REFUSED_UPGRADE_HEADERS, **_challenge(status)}
        await websocket.send_denial_response(error_response(status, error.to_dict(), headers))
    else:
        await websocket.close(code=close_code, reason=str(error)[:120])


async def siesta_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SiestaError)
    status = status_for(exc)
    return error_response(status, exc.to_dict(), _challenge(status))


def _challenge(status: int) -> dict[str, str]:
    """What a 401 tells the client to present (RFC 6750)."""
    return {"WWW-Authenticate": "Bearer"} if status == 401 else {}


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [_describe(e) for e in exc.errors()]
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        invalid = InvalidJson("request body is not valid JSON", problems=problems)
        return await siesta_error(request, invalid)
    message = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
    return await siesta_error(request, InvalidRequest(message, problems=problems))


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own answers (no route, wrong method, body too large) in our shape."""
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc, BodyTooLarge):
        return error_response(413, too_large_body(exc.limit, exc.setting))
    if exc.status_code == 405:
        return method_not_allowed(request.method, _allowed_methods(request))
    if exc.status_code == 404:
        error: SiestaError = NotFound(str(exc.detail))
    else:
        error = HttpError(str(exc.detail))
    return error_response(exc.status_code, error.to_dict(), dict(exc.headers or {}) or None)


def method_not_allowed(method: str, allowed: Sequence[str]) -> JSONResponse:
    """405 naming what the path takes, in the ``Allow`` header and the body."""
    listed = ", ".join(allowed)
    msg = f"{method} is not allowed here; this path takes {listed}"
    error = MethodNotAllowed(msg, allow=list(allowed))
    return error_response(405, error.to_dict(), {"Allow": listed})


async def unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=exc)
    return error_response(500, SiestaError("internal error").to_dict())


def install(app: FastAPI) -> None:
    app.add_exception_handler(SiestaError, siesta_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route of this path takes. Starlette names only the first
    route that matched, and FastAPI keeps an included router as one route without
    methods, so each route of each router is looked at here."""
    path = _route_path(request.scope)
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        pattern = getattr(route, "path_regex", None)
        if pattern is not None and pattern.match(path):
            methods |= set(route.methods or ())
    return sorted(methods)


def _route_path(scope: Scope) -> str:
    """The path the routes see: without the ``root_path`` a proxy mounted us under."""
    path, root = str(scope["path"]), str(scope.get("root_path", ""))
    if root and path.startswith(root + "/"):
        return path[len(root) :]
    return path


def _describe(error: Any) -> dict[str, str]:
    location = [str(part) for part in error.get("loc", ()) if part != "body"]
    return {"field": ".".join(location) or "body", "problem": str(error.get("msg", "invalid"))}
