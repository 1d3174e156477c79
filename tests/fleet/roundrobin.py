"""A round-robin HTTP proxy: every request (and every WebSocket) goes to the next
service instance in turn, with no stickiness of any kind. What a plain Kubernetes
Service in front of N replicas may do to a client at worst, made certain: two calls
in a row never reach the same instance (with more than one).

Requests and answers are streamed both ways (a process's output stream, an upload),
so a long stream holds its instance exactly as behind a real load balancer; an
instance that cannot be reached is answered 502, and a stream it cuts is cut. Which
instance served each request is kept in ``served`` (by path) for the tests' asserts.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator

import aiohttp
from aiohttp import web

from tests.helpers import free_port

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


class RoundRobinProxy:
    def __init__(self, upstreams: list[str]) -> None:
        self._upstreams = upstreams
        self._next: Iterator[int] = itertools.cycle(range(len(upstreams)))
        self.served: list[tuple[str, int]] = []
        """(path, index of the instance) of every request, in order."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def replace(self, index: int, upstream: str) -> None:
        """Instance ``index`` is now at ``upstream`` (started again on another port)."""
        self._upstreams[index] = upstream

    def instances_of(self, prefix: str) -> set[int]:
        """The instances that served the requests whose path starts with ``prefix``."""
        return {index for path, index in self.served if path.startswith(prefix)}

    async def _start(self) -> None:
        # No pool reuse across instances matters here; no timeout but the client's.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10), auto_decompress=False
        )
        app = web.Application(client_max_size=1 << 34)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _pick(self, path: str) -> str:
        index = next(self._next)
        self.served.append((path, index))
        return self._upstreams[index]

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        upstream = self._pick(request.path) + request.path_qs
        assert self._session is not None
        if request.headers.get("upgrade", "").lower() == "websocket":
            return await self._websocket(request, upstream)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = request.host
        body = request.content if request.body_exists else None
        try:
            opened = await self._session.request(
                request.method, upstream, headers=headers, data=body, allow_redirects=False
            )
        except aiohttp.ClientConnectionError as error:  # as a load balancer answers
            return web.Response(status=502, text=f"upstream {upstream}: {error}")
        async with opened as answer:
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            for name, value in answer.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    response.headers.add(name, value)
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def _websocket(self, request: web.Request, upstream: str) -> web.StreamResponse:
        assert self._session is not None
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in HOP_BY_HOP and not k.lower().startswith("sec-websocket")
        }
        protocols = [
            p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p
        ]
        try:
            inner = await self._session.ws_connect(
                upstream.replace("http://", "ws://", 1), headers=headers, protocols=protocols
            )
        except aiohttp.WSServerHandshakeError as refused:  # its answer, as it gave it
            return web.Response(status=refused.status, text=refused.message)
        except aiohttp.ClientConnectionError as error:  # as a load balancer answers
            return web.Response(status=502, text=f"upstream {upstream}: {error}")
        async with inner:
            outer = web.WebSocketResponse(protocols=[inner.protocol] if inner.protocol else [])
            await outer.prepare(request)
            await asyncio.gather(_pump(outer, inner), _pump(inner, outer))
            return outer


async def _pump(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            break
    # The closing code goes through (1012: the instance stops, attach again elsewhere).
    await sink.close(code=source.close_code or aiohttp.WSCloseCode.OK)
