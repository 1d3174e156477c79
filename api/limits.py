"""Refuses request bodies over the configured size before anyone reads them.

FastAPI's own ``max_body_size`` answers in plain text; ours answers with the
error shape of the API and states the limit in force.
"""

from __future__ import annotations

import json
import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runtime.core.errors import RequestTooLarge

_UPLOAD_ROUTE = re.compile(r"/v1/conversations/[^/]+/files/?")
_E2B_UPLOAD_ROUTE = re.compile(r"/e2b/envd/files/?")
_PORT_ROUTE = re.compile(r"/v1/conversations/[^/]+/ports/\d+/")
"""A request to a sandbox's port: streamed through, never held here (the server in
the sandbox sets its own limits)."""
_E2B_INPUT_STREAM = "/e2b/envd/process.Process/StreamInput"
"""A terminal's or a process's input, for as long as it runs: no total to cap (each
message is bounded by the Connect runtime's own read limit)."""


BODY_SETTING = "SIESTA_HTTP__MAX_REQUEST_BYTES"
UPLOAD_SETTING = "SIESTA_FILES__MAX_UPLOAD_BYTES"
E2B_UPLOAD_SETTING = "SIESTA_E2B__MAX_UPLOAD_BYTES"
FORM_FRAMING_BYTES = 1024 * 1024
"""What an upload's body may carry past its file limit: the multipart form around it."""


class BodyTooLarge(HTTPException):
    """Raised from ``receive``; FastAPI re-raises HTTPExceptions from body reading."""

    def __init__(self, limit: int, setting: str = BODY_SETTING) -> None:
        super().__init__(status_code=413, detail=too_large_message(limit, setting))
        self.limit = limit
        self.setting = setting


def too_large_message(limit: int, setting: str = BODY_SETTING) -> str:
    if setting == BODY_SETTING:
        return f"request body is over the limit of {limit} bytes ({setting})"
    return (
        f"request body is over the limit of {limit} bytes ({setting}, "
        f"{limit - FORM_FRAMING_BYTES} bytes, and 1 MiB for the form around the file)"
    )


def too_large_body(limit: int, setting: str = BODY_SETTING) -> dict[str, object]:
    message = too_large_message(limit, setting)
    return RequestTooLarge(message, limit=limit, unit="bytes").to_dict()


class BodySizeLimit:
    """Pure ASGI middleware: checks Content-Length, then counts streamed bytes."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, upload_max_bytes: int, e2b_upload_max_bytes: int = 0
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.upload_max_bytes = upload_max_bytes
        self.e2b_upload_max_bytes = e2b_upload_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limited = self.limit_for(scope)
        if limited is None:
            await self.app(scope, receive, send)
            return
        limit, setting = limited
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(send, limit, setting)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit, setting)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(send, limit, setting)

    def limit_for(self, scope: Scope) -> tuple[int, str] | None:
        """The body limit of this request and the setting it comes from."""
        path = str(scope.get("path", ""))
        if _PORT_ROUTE.match(path):
            return None
        if scope.get("method") != "POST":
            return self.max_bytes, BODY_SETTING
        if _UPLOAD_ROUTE.fullmatch(path):
            return self.upload_max_bytes, UPLOAD_SETTING
        if self.e2b_upload_max_bytes and _E2B_UPLOAD_ROUTE.fullmatch(path):
            return self.e2b_upload_max_bytes, E2B_UPLOAD_SETTING
        if path == _E2B_INPUT_STREAM:
            return None
        return self.max_bytes, BODY_SETTING

    async def _refuse(self, send: Send, limit: int, setting: str) -> None:
        body = json.dumps({"error": too_large_body(limit, setting)}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
