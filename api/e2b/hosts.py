"""E2B's host form of a sandbox's ports: ``PORT-SANDBOXID.DOMAIN`` in ``Host``.

The SDK's ``sandbox.get_host(port)`` builds that name from the ``domain`` create and
connect answer (``SIESTA_E2B__PORTS_DOMAIN``). A request whose ``Host`` has that form
is forwarded to the port before any other routing, HTTP and WebSocket alike. A paused
sandbox created with ``lifecycle.auto_resume`` is resumed by the request (as
``connect`` would); one without answers 404. A sandbox that does not exist (killed,
timed out) answers as E2B's edge does: 502 ``{"sandboxId", "message": "The sandbox
was not found", "code": 502}``. As on
E2B, a sandbox's ports are public unless it was created with
``network={"allow_public_traffic": False}``: then each request must carry the
sandbox's ``trafficAccessToken`` as ``e2b-traffic-access-token``. The server sees
``Host: localhost:PORT``, or the sandbox's ``mask_request_host`` (``${PORT}``: the port).
"""

from __future__ import annotations

import hmac
import re
from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from api.e2b.errors import refuse
from api.errors import error_response, refuse_websocket, status_for
from api.ports import PortTarget, http_response, websocket_session
from runtime.core.context import CallContext
from runtime.core.errors import Forbidden, InvalidHeader, InvalidRequest, SiestaError
from runtime.core.records import E2bSandbox
from runtime.sandbox.ports.errors import PortSandboxMissing
from runtime.sandbox.ports.tokens import PortGrant, PortTokens
from runtime.services import Services

TRAFFIC_HEADER = "e2b-traffic-access-token"


class TrafficTokenRefused(Forbidden):
    code = "traffic_token_refused"


MASKED_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}(:[0-9]{1,5})?")
"""What a ``maskRequestHost`` must be once ``${PORT}`` is put in: a host, maybe a port
(it becomes a header: nothing else may ride along)."""


def mask_request_host(body: dict[str, Any]) -> str | None:
    """A create body's ``network.maskRequestHost``: the ``Host`` the sandbox's servers
    see (``${PORT}`` is the port asked for); 400 unless it is a host name."""
    network = body.get("network")
    mask = network.get("maskRequestHost") if isinstance(network, dict) else None
    if mask is None:
        return None
    if not isinstance(mask, str) or not MASKED_HOST.fullmatch(mask.replace("${PORT}", "1")):
        raise refuse(400, "network.maskRequestHost must be a host name, maybe :PORT or :${PORT}")
    return mask


def public_traffic(body: dict[str, Any]) -> bool:
    """A create body's ``network.allowPublicTraffic`` (E2B's default: true)."""
    network = body.get("network")
    return not (isinstance(network, dict) and network.get("allowPublicTraffic") is False)


def traffic_token(tokens: PortTokens, sandbox: E2bSandbox) -> str:
    """The sandbox's traffic access token: derived, never stored; it changes with the
    sandbox's envd access token (a new sandbox, a new token)."""
    return tokens.issue(PortGrant(sandbox.org, sandbox.sandbox_id, "e2b:" + sandbox.access_token))


class E2bSandboxGone(PortSandboxMissing):
    """No such sandbox (any more): E2B's edge answers 502 with a body of its own."""


class PortHosts:
    """ASGI middleware: requests to ``PORT-SANDBOXID.DOMAIN`` go to that port."""

    def __init__(self, app: ASGIApp, domain: str | None) -> None:
        self.app = app
        self._host = (
            re.compile(rf"(\d{{1,5}})-([A-Za-z0-9._:-]{{1,128}})\.{re.escape(domain)}(:\d+)?", re.I)
            if domain
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._host is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        match = self._host.fullmatch(host)
        if match is None:
            await self.app(scope, receive, send)
            return
        port, sandbox_id = int(match.group(1)), match.group(2)
        services: Services = scope["app"].state.services
        if scope["type"] == "websocket":
            websocket = WebSocket(scope, receive, send)
            try:
                target = await _target(services, scope, port, sandbox_id)
            except SiestaError as error:
                await refuse_websocket(websocket, error)
                return
            await websocket_session(services, target, websocket)
            return
        try:
            target = await _target(services, scope, port, sandbox_id)
            response = await http_response(services, target, Request(scope, receive))
        except E2bSandboxGone:
            # E2B's edge, word for word: what the SDKs' callers (and their tests) read.
            body = {"sandboxId": sandbox_id, "message": "The sandbox was not found", "code": 502}
            await JSONResponse(body, status_code=502)(scope, receive, send)
            return
        except SiestaError as error:
            await error_response(status_for(error), error.to_dict())(scope, receive, send)
            return
        await response(scope, receive, send)


async def _target(services: Services, scope: Scope, port: int, sandbox_id: str) -> PortTarget:
    """Where the request goes. Every check comes before any effect: a private sandbox's
    token is checked before its traffic may wake it or move its timeout."""
    if not 1 <= port <= 65535:
        msg = f"port must be 1 to 65535, not {port}"
        raise InvalidRequest(msg, port=port)
    given = dict(scope["headers"]).get(TRAFFIC_HEADER.encode(), b"")
    if not given.isascii():  # a token is URL-safe ASCII: other bytes are a bad request
        msg = f"the {TRAFFIC_HEADER} header must be ASCII"
        raise InvalidHeader(msg, header=TRAFFIC_HEADER)
    sandbox = await to_thread.run_sync(services.e2b.find, sandbox_id)
    if sandbox is None:  # never made, killed, or ended by its timeout
        msg = f"the sandbox {sandbox_id} was not found"
        raise E2bSandboxGone(msg, port=port)
    wakes = sandbox.state == "paused" and sandbox.auto_resume
    if sandbox.state != "running" and not wakes:
        # E2B's answer for a paused sandbox without auto-resume: traffic does not wake it.
        msg = f"the sandbox {sandbox_id} was not found or is not running"
        raise PortSandboxMissing(msg, port=port)
    if not sandbox.public_traffic:
        expected = traffic_token(services.port_tokens, sandbox).encode()
        if not hmac.compare_digest(given, expected):
            msg = (
                f"this sandbox's ports are private: send its trafficAccessToken as {TRAFFIC_HEADER}"
            )
            raise TrafficTokenRefused(msg)
    found, running = sandbox, sandbox
    if wakes:
        # Created with auto-resume: traffic wakes it (as connect would), then is served.
        running, _ = await to_thread.run_sync(
            lambda: services.e2b.connect(found.org, found.sandbox_id, None)
        )
    ctx = CallContext(org=running.org, user=running.owner, conversation=running.sandbox_id)
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string", b"")
    host = running.mask_request_host
    return PortTarget(
        ctx,
        port,
        raw_path + (b"?" + query if query else b""),
        host=host.replace("${PORT}", str(port)) if host else None,
    )
