"""Request and conversation ids for the logs; the request id goes back as a header.

A pure ASGI middleware (Starlette's ``BaseHTTPMiddleware`` costs a task and a
stream copy per request, and holds back streamed responses).
"""

from __future__ import annotations

import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runtime.core import logs

HEADER = b"x-request-id"
GIVEN_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
"""A caller's request id is kept only in this form: it goes into every log line and
back as a header, so other bytes (control characters, a 10 KB value) are replaced."""


class RequestContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(HEADER, b"")
        request_id = given.decode() if GIVEN_ID.fullmatch(given) else uuid.uuid4().hex
        logs.REQUEST_ID.set(request_id)
        logs.CALLER.set(None)  # set by authentication
        parts = str(scope.get("path", "")).split("/")
        logs.CONVERSATION.set(parts[3] if len(parts) > 3 and parts[2] == "conversations" else None)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, request_id.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_id)
