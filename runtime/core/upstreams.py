"""HTTP clients for the services this one calls: one pooled client per upstream.

Adapters and gateways take their client from here instead of making one-shot
requests, so connections are reused, every request has the configured timeout,
and tests can put a transport of their own underneath everything. Each request
is a client span carrying the caller's trace on as ``traceparent``.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

from runtime.core import tracing
from runtime.core.tls import client_context

USER_AGENT = "SiestaRuntime/0.1"


class Upstreams:
    def __init__(
        self, timeout_seconds: float, transport: httpx.BaseTransport | None = None
    ) -> None:
        self._timeout = timeout_seconds
        self._transport = transport
        self._clients: dict[str, httpx.Client] = {}
        self._lock = threading.Lock()

    def client(
        self,
        name: str,
        transport: httpx.BaseTransport | None = None,
        *,
        propagate: bool = True,
    ) -> httpx.Client:
        """The client for the upstream ``name`` (made on first use). Redirects are
        never followed on their own: a caller that follows them checks each hop.
        ``transport``: this client's own (the page fetches' address check), which
        a test transport given to all does not replace. ``propagate=False``: no
        ``traceparent`` (web pages a model names are not ours to tell)."""
        with self._lock:
            if name not in self._clients:
                self._clients[name] = _TracedClient(
                    name,
                    propagate,
                    timeout=self._timeout,
                    transport=transport or self._transport,
                    follow_redirects=False,
                    verify=client_context(),
                    headers={"User-Agent": USER_AGENT},
                )
            return self._clients[name]

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


class _TracedClient(httpx.Client):
    """Every request (``send`` is under all of them) is an ``upstream`` span; its
    attributes are the upstream's name, the method and the status: never the URL,
    which may carry a key or the model's words."""

    def __init__(self, upstream: str, propagate: bool, **options: Any) -> None:
        super().__init__(**options)
        self._upstream = upstream
        self._propagate = propagate

    def send(self, request: httpx.Request, **options: Any) -> httpx.Response:
        with tracing.span(
            f"upstream {self._upstream}",
            kind=tracing.SpanKind.CLIENT,
            upstream=self._upstream,
        ) as span:
            span.set_attribute("http.request.method", request.method)
            if self._propagate:
                tracing.inject(request.headers)
            response = super().send(request, **options)
            span.set_attribute("http.response.status_code", response.status_code)
            tracing.outcome(span, f"http_{response.status_code}" if response.is_error else None)
            return response
