"""One HTTP/1.1 request forwarded over a ``PortConnection``, with h11 as the client.

The request's body is streamed to the server while its answer is read, so a server
that answers before the body ends (a refusal) is not kept waiting; the answer's body
is streamed back as it comes (server-sent events keep flowing). One request per
connection (``Connection: close``): the connection ends with the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import h11

from runtime.sandbox.ports.connection import PortConnection
from runtime.sandbox.ports.errors import PortConnectionLost

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers about one hop, never forwarded (RFC 9110 7.6.1); so are those ``Connection`` names."""

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class ForwardedRequest:
    method: bytes
    target: bytes
    """Path and query as the server in the sandbox sees them."""
    headers: Headers
    """The client's, minus what only the service reads (tokens) and hop-by-hop ones."""
    has_body: bool
    length: int | None
    """The body's Content-Length (``None`` with a body: sent chunked)."""


@dataclass(frozen=True)
class ForwardedResponse:
    status: int
    headers: Headers
    body: AsyncIterator[bytes]
    """The body as it comes; iterate it to the end (or ``aclose`` it) to end the connection."""


def end_to_end(headers: Headers) -> Headers:
    """``headers`` without hop-by-hop ones."""
    named = {
        name.strip().lower()
        for key, value in headers
        if key.lower() == b"connection"
        for name in value.split(b",")
    }
    return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() not in named]


def canonical(name: bytes) -> bytes:
    """``x-forwarded-for`` as ``X-Forwarded-For``. The ASGI server hands the service
    lower-cased names; E2B's proxy (Go) sends this form, and servers that compare
    names by case (more than a few hand-written ones do) expect it."""
    return b"-".join(part.capitalize() for part in name.split(b"-"))


async def forward(
    connection: PortConnection, request: ForwardedRequest, body: AsyncIterator[bytes]
) -> ForwardedResponse:
    """Send ``request`` (its body from ``body``) and answer once the response's head came."""
    client = h11.Connection(h11.CLIENT)
    headers = [(canonical(k), v) for k, v in request.headers if k.lower() != b"content-length"]
    headers.append((b"Connection", b"close"))
    if request.has_body:
        if request.length is not None:
            headers.append((b"Content-Length", str(request.length).encode()))
        else:
            headers.append((b"Transfer-Encoding", b"chunked"))
    head = h11.Request(method=request.method, target=request.target, headers=headers)
    await connection.send(client.send(head) or b"")
    upload = asyncio.create_task(_send_body(connection, client, body, request.has_body))
    try:
        event = await _next_event(connection, client, upload)
        while isinstance(event, h11.InformationalResponse):  # 100 Continue and the like
            event = await _next_event(connection, client, upload)
    except BaseException:
        upload.cancel()
        raise
    if not isinstance(event, h11.Response):
        upload.cancel()
        msg = f"port {connection.port} answered no HTTP response"
        raise PortConnectionLost(msg, port=connection.port)
    response_headers = [
        (k, v) for k, v in end_to_end(list(event.headers)) if k not in (b"date", b"server")
    ]  # the service sets both itself
    return ForwardedResponse(event.status_code, response_headers, _body(connection, client, upload))


async def _send_body(
    connection: PortConnection, client: h11.Connection, body: AsyncIterator[bytes], has_body: bool
) -> None:
    async for chunk in body:  # to its end even when empty: the caller may wait for that
        if chunk and has_body:
            await connection.send(client.send(h11.Data(data=chunk)) or b"")
    await connection.send(client.send(h11.EndOfMessage()) or b"")


async def _next_event(
    connection: PortConnection, client: h11.Connection, upload: asyncio.Task[None]
) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
    while True:
        try:
            event = client.next_event()
        except h11.RemoteProtocolError as exc:
            msg = f"port {connection.port} answered something that is not HTTP/1.1: {exc}"
            raise PortConnectionLost(msg, port=connection.port) from exc
        if event is not h11.NEED_DATA:
            return event
        client.receive_data(await _receive_unless_upload_fails(connection, upload))


async def _receive_unless_upload_fails(
    connection: PortConnection, upload: asyncio.Task[None]
) -> bytes:
    """The server's next bytes; the upload's error as soon as it fails (a client gone
    mid-upload ends the connection now, not at the idle limit)."""
    if upload.done():
        _raise_if_failed(upload)
        return await connection.receive()
    receiving = asyncio.ensure_future(connection.receive())
    try:
        await asyncio.wait({receiving, upload}, return_when=asyncio.FIRST_COMPLETED)
        if not receiving.done():
            _raise_if_failed(upload)  # else the upload ended well: keep waiting for the server
        return await receiving
    finally:
        receiving.cancel()


def _raise_if_failed(upload: asyncio.Task[None]) -> None:
    if not upload.cancelled() and upload.exception() is not None:
        raise upload.exception()  # type: ignore[misc]


async def _body(
    connection: PortConnection, client: h11.Connection, upload: asyncio.Task[None]
) -> AsyncIterator[bytes]:
    try:
        while True:
            event = await _next_event(connection, client, upload)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return
            elif event is h11.PAUSED:
                return  # the message is complete; nothing more is read on this connection
    finally:
        upload.cancel()
        with contextlib.suppress(BaseException):
            await upload
        await connection.aclose()
