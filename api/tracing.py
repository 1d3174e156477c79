"""A server span per request, continuing the caller's W3C trace context
(``traceparent`` / ``tracestate``).

A pure ASGI middleware, like ``context.py``: the span stays current for the
whole response, streamed ones included, and the handlers' worker threads
inherit it (``anyio`` copies context variables into them).
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runtime.core import tracing

_PROPAGATED = {b"traceparent", b"tracestate"}
_ORG = b"x-siesta-org"


class TraceContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier: dict[str, str] = {}
        org = None
        for name, value in scope.get("headers") or []:
            if name in _PROPAGATED:
                carrier[name.decode()] = value.decode("latin-1")
            elif name == _ORG:
                org = value.decode("latin-1")
        # Attached even with tracing off (no-op spans): the caller's trace still
        # reaches the upstream calls.
        token = otel_context.attach(tracing.extract(carrier)) if carrier else None
        try:
            if tracing.recording():
                await self._traced(scope, receive, send, org)
            else:
                await self.app(scope, receive, send)
        finally:
            if token is not None:
                otel_context.detach(token)

    async def _traced(self, scope: Scope, receive: Receive, send: Send, org: str | None) -> None:
        method = str(scope.get("method", ""))
        parts = str(scope.get("path", "")).split("/")
        conversation = parts[3][:128] if len(parts) > 3 and parts[2] == "conversations" else None
        with tracing.span(
            method, kind=tracing.SpanKind.SERVER, org=org, conversation=conversation
        ) as span:
            span.set_attribute("http.request.method", method)

            async def send_traced(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    tracing.outcome(span, f"http_{status}" if status >= 500 else None)
                await send(message)

            await self.app(scope, receive, send_traced)
            route = getattr(scope.get("route"), "path", None)
            if isinstance(route, str):
                span.set_attribute("http.route", route)
                span.update_name(f"{method} {route}")
