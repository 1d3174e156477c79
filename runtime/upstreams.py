"""HTTP clients for the services this one calls: one pooled client per upstream.

Adapters and gateways take their client from here instead of making one-shot
requests, so connections are reused, every request has the configured timeout,
and tests can put a transport of their own underneath everything.
"""

from __future__ import annotations

import threading

import httpx

USER_AGENT = "SiestaRuntime/0.1"


class Upstreams:
    def __init__(
        self, timeout_seconds: float, transport: httpx.BaseTransport | None = None
    ) -> None:
        self._timeout = timeout_seconds
        self._transport = transport
        self._clients: dict[str, httpx.Client] = {}
        self._lock = threading.Lock()

    def client(self, name: str, transport: httpx.BaseTransport | None = None) -> httpx.Client:
        """The client for the upstream ``name`` (made on first use). Redirects are
        never followed on their own: a caller that follows them checks each hop.
        ``transport``: this client's own (the page fetches' address check), which
        a test transport given to all does not replace."""
        with self._lock:
            if name not in self._clients:
                self._clients[name] = httpx.Client(
                    timeout=self._timeout,
                    transport=transport or self._transport,
                    follow_redirects=False,
                    headers={"User-Agent": USER_AGENT},
                )
            return self._clients[name]

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
