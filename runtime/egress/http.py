"""The few pieces of HTTP/1.1 the egress proxy reads and writes itself: the target of a
request, the head sent upstream, and the plain-text answer of a refusal."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from runtime.core.network_rules import normalise_host

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
}


class Refused(Exception):
    """A request the proxy will not carry: ``status`` and ``reason`` go back to the
    client and into the refusal event."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail


def authority(target: str, default_port: int) -> tuple[str, int]:
    host, port = target, default_port
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        if rest.startswith(":"):
            port = port_of(rest[1:])
    elif ":" in target:
        host, _, port_text = target.rpartition(":")
        port = port_of(port_text)
    if not host:
        raise Refused(400, "bad_request", f"no host in {target!r}")
    return normalise_host(host), port


def port_of(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise Refused(400, "bad_request", f"bad port {text!r}")
    return int(text)


def upstream_head(method: str, url: Any, headers: list[list[str]]) -> bytes:
    """The request as the origin server gets it: origin-form target, the Host the
    URL names (a different Host header would reach another site on that address),
    no hop-by-hop or proxy headers, and ``Connection: close``."""
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    kept = [
        f"{name}:{value}"
        for name, value in headers
        if name.strip().lower() not in HOP_BY_HOP and name.strip().lower() != "host"
    ]
    lines = [f"{method} {path} HTTP/1.1", f"Host: {url.netloc.rpartition('@')[2]}", *kept]
    return ("\r\n".join([*lines, "Connection: close", "", ""])).encode("latin-1")


async def answer(writer: asyncio.StreamWriter, status: int, reason: str, detail: str) -> None:
    body = f"siesta egress proxy: {detail}\n".encode()
    titles = {
        400: "Bad Request",
        403: "Forbidden",
        407: "Proxy Authentication Required",
        431: "Request Header Fields Too Large",
        502: "Bad Gateway",
        503: "Service Unavailable",
    }
    head = [
        f"HTTP/1.1 {status} {titles.get(status, 'Error')}",
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(body)}",
        f"X-Siesta-Egress-Refusal: {reason}",
        "Connection: close",
    ]
    if status == 407:
        head.append('Proxy-Authenticate: Basic realm="siesta-egress"')
    with contextlib.suppress(ConnectionError, OSError):
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
