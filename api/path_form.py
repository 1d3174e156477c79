"""The path form of a sandbox's ports (``/v1/conversations/{id}/ports/...``) is for
API clients: whatever a server in a sandbox answers there is made inert on the
service's own origin, where the console and the API live.

Every answer on those paths (the server's, and the service's own errors) carries
``Content-Security-Policy: sandbox``: a browser that opens it anyway renders the page
in an opaque origin with no script, no forms and no plugins, so nothing it holds can
read or post to this origin. What a server could use to reach past its page on this
origin is taken out: cookies it sets (they would be this origin's) and
``Clear-Site-Data`` (it would sign the operator out of the console). Browsers that
should run a preview use the host form on its own domain (``api/previews.py``).

Refusing browser navigations (``Sec-Fetch-Mode: navigate``) was the other choice; it
leans on headers the client chooses to send, so it guards only the browsers that send
them, and still leaves a page loaded some other way (an ``<object>``, an old browser)
running here. A response header is enforced by the browser whatever made the request.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PATH_FORM = re.compile(r"^/v1/conversations/[^/]+/ports/")
INERT_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", b"sandbox"),
    (b"x-content-type-options", b"nosniff"),
    # No other origin embeds or reads these answers in a browser (API clients are not
    # browsers: these do not touch them), and a page opened from here keeps no handle
    # on the window that opened it (the console's).
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]
DROPPED = frozenset(
    {
        b"set-cookie",
        b"set-cookie2",
        b"clear-site-data",
        b"service-worker-allowed",
        *(name for name, _ in INERT_HEADERS if name != b"content-security-policy"),
    }
)
"""Dropped from what the server sent. Its own ``Content-Security-Policy`` stays: every
policy a response carries is enforced, so one can only add to ``sandbox``."""


def inert(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` of a path-form answer as the browser gets them."""
    return [(k, v) for k, v in headers if k.lower() not in DROPPED] + INERT_HEADERS


class InertPathForm:
    """ASGI middleware: every path-form answer (HTTP, and a refused WebSocket upgrade)
    goes out through ``inert``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not PATH_FORM.match(scope["path"]):
            await self.app(scope, receive, send)
            return

        async def send_inert(message: Message) -> None:
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                message = {**message, "headers": inert(list(message.get("headers", [])))}
            await send(message)

        await self.app(scope, receive, send_inert)
