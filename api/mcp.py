"""``/mcp``: the MCP server over streamable HTTP, behind the same bearer tokens.

Every request carries what a session serves in its headers, as on the
conversation routes — ``X-Siesta-Org``, ``X-Siesta-User``, ``X-Siesta-Conversation``
and optionally ``X-Siesta-Agent``, ``X-Siesta-Base-Image``,
``X-Siesta-Egress-Allow``, ``X-Siesta-Sub-Agents`` — so an MCP host configures
them once per server entry. A request without a valid token gets 401, without the
``sandbox`` scope 403, without the context 400, with the service's error body.

Stateless: no MCP session lives in this process between requests (they carry all
their context), so any instance behind a load balancer can serve any request.

The MCP SDK is loaded on the first request, not at start-up: importing it costs
~0.6 s of CPU (a fifth of the service's start), and most instances of a fleet, and
every one-shot command, never serve MCP. The first request waits for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from anyio import to_thread
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from api.deps import call_context
from api.errors import error_response, method_not_allowed, status_for
from runtime.core.errors import (
    ForbiddenScope,
    MissingContext,
    SiestaError,
    StateUnavailable,
    Unauthorized,
)
from runtime.mcp.caller import McpCaller
from runtime.services import Services

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

METHODS = ("GET", "POST")
"""What the endpoint takes: POST for messages, GET for the server's stream. The SDK
would take DELETE too, to end a session, but stateless there is none to end."""
CALLER_KEY = "siesta.mcp.caller"
"""Where the checked caller rides in the ASGI scope, from the check to the tool call."""


class McpEndpoint:
    """The ASGI app of ``/mcp``; it serves while ``serving`` (the app's lifespan) runs.

    The SDK's session manager runs in a task of the lifespan (its task group must
    be entered and left in one task), started when the first request asks for it."""

    def __init__(self) -> None:
        self._services: Services | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._wanted = anyio.Event()
        self._settled = anyio.Event()
        self._failure: BaseException | None = None

    @contextlib.asynccontextmanager
    async def serving(self, services: Services) -> AsyncIterator[None]:
        self._wanted, self._settled, self._failure = anyio.Event(), anyio.Event(), None
        self._services = services
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._serve_when_wanted, services)
                try:
                    yield
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            self._services = self._manager = None

    async def _serve_when_wanted(self, services: Services) -> None:
        await self._wanted.wait()
        try:
            # In a thread: the import must not stall the event loop's other requests.
            manager = await to_thread.run_sync(_session_manager, services)
        except Exception as exc:  # the endpoint answers 503 with it; the service lives on
            self._failure = exc
            self._settled.set()
            return
        async with manager.run():
            self._manager = manager
            self._settled.set()
            await anyio.sleep_forever()

    async def _ready_manager(self) -> StreamableHTTPSessionManager | None:
        self._wanted.set()
        await self._settled.wait()
        return self._manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services = self._services
        if services is None:
            error: SiestaError = StateUnavailable("the MCP endpoint is not serving yet")
            await error_response(503, error.to_dict())(scope, receive, send)
            return
        if scope["method"] not in METHODS:
            await method_not_allowed(scope["method"], METHODS)(scope, receive, send)
            return
        try:
            # Off the event loop: a registered agent's configuration is read from the store.
            scope[CALLER_KEY] = await to_thread.run_sync(_check, services, Request(scope))
        except SiestaError as refused:
            headers = {"WWW-Authenticate": "Bearer"} if isinstance(refused, Unauthorized) else None
            await error_response(status_for(refused), refused.to_dict(), headers)(
                scope, receive, send
            )
            return
        manager = await self._ready_manager()
        if manager is None:
            error = StateUnavailable(f"the MCP endpoint could not start: {self._failure!r}")
            await error_response(503, error.to_dict())(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)


def _session_manager(services: Services) -> StreamableHTTPSessionManager:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from runtime.mcp.server import build_server

    return StreamableHTTPSessionManager(app=build_server(services, _caller_of), stateless=True)


def _check(services: Services, request: Request) -> McpCaller:
    """The token (with the ``sandbox`` scope) and the conversation context."""
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    caller = services.tokens.identify(token.strip()) if scheme.lower() == "bearer" else None
    if caller is None:
        msg = "a valid bearer token is required (Authorization: Bearer <token>)"
        raise Unauthorized(msg)
    if not caller.may("sandbox"):
        msg = f"/mcp needs a token with the 'sandbox' scope; {caller.name!r} lacks it"
        raise ForbiddenScope(msg, scope="sandbox", token=caller.name)
    headers = request.headers
    conversation = headers.get("x-siesta-conversation")
    if not conversation:
        msg = "/mcp needs the X-Siesta-Conversation header: a session serves one conversation"
        raise MissingContext(msg, headers=["X-Siesta-Conversation"])
    ctx = call_context(
        request,
        conversation,
        caller,
        x_siesta_org=headers.get("x-siesta-org"),
        x_siesta_user=headers.get("x-siesta-user"),
        x_siesta_agent=headers.get("x-siesta-agent"),
        x_siesta_base_image=headers.get("x-siesta-base-image"),
        x_siesta_egress_allow=headers.get("x-siesta-egress-allow"),
        x_siesta_sub_agents=headers.get("x-siesta-sub-agents"),
        x_siesta_message_id=headers.get("x-siesta-message-id"),
    )
    base = str(request.base_url).rstrip("/")

    def file_link(file_id: str) -> str:
        return f"{base}/v1/conversations/{ctx.conversation}/files/{file_id}/content"

    return McpCaller(ctx, caller.name, file_link)


def _caller_of(request: ServerRequestContext[Any, Any]) -> McpCaller:
    caller = request.request.scope.get(CALLER_KEY) if isinstance(request.request, Request) else None
    if not isinstance(caller, McpCaller):  # only requests that passed ``_check`` get here
        msg = "an MCP request without its checked caller"
        raise Unauthorized(msg)
    return caller
