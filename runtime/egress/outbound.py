"""The service's own fetches of pages a model names (``web_fetch``, search results)
and of documents added by URL, under the same address policy as the egress proxy.

The check happens where the connection is made: the name is resolved once, every
address it gives is checked, and the socket connects to a checked address. A
resolver that answers differently the second time (DNS rebinding) gets no second
question. TLS still verifies the certificate for the name, not the address.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpcore
import httpx

from runtime.core.addresses import IpAddress, refusal
from runtime.core.errors import FetchFailed, UrlNotAllowed
from runtime.core.tls import client_context

Resolver = Callable[[str, int], list[IpAddress]]


class AddressRefused(Exception):
    """The name resolves to an address the policy refuses."""


def system_resolver(host: str, port: int) -> list[IpAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


class CheckedBackend(httpcore.NetworkBackend):
    def __init__(self, *, allow_private: bool, resolve: Resolver = system_resolver) -> None:
        self._allow_private = allow_private
        self._resolve = resolve
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self._resolve(host, port)
        except OSError as exc:
            msg = f"{host} does not resolve ({exc})"
            raise httpcore.ConnectError(msg) from exc
        if not self._allow_private:
            for address in addresses:
                reason = refusal(address)
                if reason is not None:
                    msg = f"{host} is on a {reason} address ({address}): not allowed"
                    raise AddressRefused(msg)
        failure: Exception = httpcore.ConnectError(f"{host} has no address")
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        msg = "pages are never fetched over a Unix socket"
        raise AddressRefused(msg)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def checked_transport(backend: CheckedBackend) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(verify=client_context())
    # httpx exposes no network-backend option; its transport is a thin shell over
    # this pool, so we give it a pool whose every connection passes the check.
    transport._pool = httpcore.ConnectionPool(ssl_context=client_context(), network_backend=backend)
    return transport


MAX_REDIRECTS = 5


@dataclass(frozen=True)
class Fetched:
    body: bytes
    content_type: str
    """Its media type alone (``text/html``), parameters left out."""
    encoding: str | None
    url: str
    """Where it was found, past any redirect."""


def fetch(
    client: httpx.Client,
    url: str,
    *,
    max_bytes: int,
    timeout: httpx.Timeout | float | None,
    check: Callable[[str], None],
    too_large: Callable[[str], Exception] | None = None,
) -> Fetched:
    """A GET of ``url`` following up to ``MAX_REDIRECTS`` redirects, each URL passed to
    ``check`` first (it raises its refusal), the body read up to ``max_bytes``: cut
    there, or refused with ``too_large(url)`` when given. An answer of 400 or more, a
    refused address and a failed connection raise ``FetchFailed``/``UrlNotAllowed``."""
    limit = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
    for _ in range(MAX_REDIRECTS + 1):
        check(url)
        try:
            with client.stream("GET", url, timeout=limit) as answer:
                if answer.is_redirect and "location" in answer.headers:
                    url = urljoin(url, answer.headers["location"])
                    continue
                if answer.status_code >= 400:
                    msg = f"{url} answered HTTP {answer.status_code}"
                    raise FetchFailed(msg, url=url, status=answer.status_code)
                body = bytearray()
                for chunk in answer.iter_bytes():
                    body += chunk
                    if too_large is None and len(body) >= max_bytes:
                        break  # cut here: no read past what is kept
                    if len(body) > max_bytes and too_large is not None:
                        raise too_large(url)
                content_type = answer.headers.get("content-type", "").split(";")[0].strip()
                return Fetched(bytes(body[:max_bytes]), content_type, answer.encoding, url)
        except AddressRefused as exc:
            raise UrlNotAllowed(str(exc), url=url) from exc
        except httpx.HTTPError as exc:
            msg = f"{url} could not be fetched: {type(exc).__name__}"
            raise FetchFailed(msg, url=url) from exc
    msg = f"{url}: more than {MAX_REDIRECTS} redirects"
    raise FetchFailed(msg, url=url)
