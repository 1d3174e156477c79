"""Requests by method, route template and status class, and how long they took to
answer (``siesta_http_requests_total``, ``siesta_http_request_duration_seconds``).

A pure ASGI middleware, outermost, so its time includes every other middleware.

- ``route`` is the template the router matched (``/v1/conversations/{conversation_id}/
  sandbox/runCommand``), behind a mount with the mount's prefix (``/e2b/sandboxes``);
  anything no route took (a 404, a sandbox's port reached by its host name) is
  ``unmatched``: a raw path is chosen by the caller and would be a series kept forever.
- ``status`` is the class (``2xx`` … ``5xx``): a closed set whatever a handler sends.
  A request that raised before answering counts as ``5xx`` (the server's error page
  answers it outside this middleware); one cancelled because its caller left is not
  counted.
- The duration is the time to the response's start (its status and headers), not to
  its last byte: a streamed answer (a command's output, a port, a watch) lasts as long
  as its caller wants, and would say nothing about the service's latency.
- A WebSocket is counted once, when its handshake is answered (``method="WEBSOCKET"``,
  ``1xx`` accepted, else the refusal's class) and never timed: its life is the caller's.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runtime.core.metrics import REGISTRY

UNMATCHED = "unmatched"
WEBSOCKET = "WEBSOCKET"
_HANDSHAKE_ANSWERS = ("websocket.accept", "websocket.close", "websocket.http.response.start")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Any other method (a caller may send any token) is counted as ``OTHER``."""

REQUESTS = Counter(
    "siesta_http_requests",
    "HTTP requests answered, by method, route template and status class",
    ["method", "route", "status"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "siesta_http_request_duration_seconds",
    "Time from a request's arrival to its response's start (status and headers), by "
    "method and route template",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600),
    registry=REGISTRY,
)


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answered = False
        method = str(scope["method"]) if scope["method"] in METHODS else "OTHER"
        root_path = str(scope.get("root_path", ""))

        async def timed_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                route = route_template(scope, root_path)
                REQUEST_SECONDS.labels(method, route).observe(time.perf_counter() - started)
                REQUESTS.labels(method, route, status_class(int(message["status"]))).inc()
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        except Exception:  # not a cancellation: a caller who left gets no answer to count
            if not answered:
                route = route_template(scope, root_path)
                REQUEST_SECONDS.labels(method, route).observe(time.perf_counter() - started)
                REQUESTS.labels(method, route, "5xx").inc()
            raise

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        root_path = str(scope.get("root_path", ""))
        answered = False

        async def counted_send(message: Message) -> None:
            nonlocal answered
            kind = message["type"]
            if not answered and kind in _HANDSHAKE_ANSWERS:
                answered = True
                status = {"websocket.accept": "1xx", "websocket.close": "4xx"}.get(kind)
                status = status or status_class(int(message.get("status", 500)))
                REQUESTS.labels(WEBSOCKET, route_template(scope, root_path), status).inc()
            await send(message)

        await self.app(scope, receive, counted_send)


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 599 else "5xx"


def route_template(scope: Scope, root_path: str) -> str:
    """The template of the route the router chose for this request (the routers record
    it in the scope as they go), with the prefix of any mount it went through."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        path = _plain_route(scope)
        if path is None:
            return UNMATCHED
    mounted = str(scope.get("root_path", ""))[len(root_path) :]
    return mounted + path


def _plain_route(scope: Scope) -> str | None:
    """A Starlette ``Route`` the app itself holds (``/mcp``): FastAPI's router records
    only its own routes in the scope. Only those few are tried, so an unmatched path
    costs a handful of comparisons, not one per route."""
    app = scope.get("app")
    for route in getattr(getattr(app, "router", None), "routes", ()):
        if type(route) is Route and route.matches(scope)[0] is not Match.NONE:
            return route.path
    return None
