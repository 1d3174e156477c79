"""What an ``Idempotency-Key`` keeps of an answer, and how it is given back.

The answer is watched as it goes out (never held back: a stream streams) and kept
when it is final; a retry gets it again. The request's body is spooled, so that it
can be hashed before anything runs and then read by the route as if never touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from typing import IO

from starlette.types import Message, Receive, Send

from api.errors import STATUS_BY_CODE, status_for
from runtime.core.errors import IdempotentResultNotKept, OutcomeUnknown, SiestaError
from runtime.core.records import KeptResponse

REPLAYED = b"idempotent-replayed"
KEPT = b"idempotency-kept"
_SPOOL_IN_MEMORY = 1024 * 1024
_CHUNK = 64 * 1024


def keeps(status: int) -> bool:
    """Whether an answer is final: "try again" answers leave the key free."""
    return status < 500 and status not in (409, 499)


def unknown_outcome(kept: KeptResponse) -> bool:
    if kept.status != 409 or kept.body is None:
        return False
    with contextlib.suppress(ValueError, LookupError, TypeError):
        return bool(json.loads(kept.body)["error"]["code"] == OutcomeUnknown.code)
    return False


class Capture:
    """Watches the answer go out and keeps what a retry should get."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.status = 0
        self.content_type = ""
        self.chunks: list[bytes] = []
        self.size = 0
        self.too_large = False
        self.complete = False

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith("text/event-stream")

    def see(self, message: Message) -> Message:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            headers = list(message.get("headers", []))
            found = dict(headers)
            self.content_type = found.get(b"content-type", b"").decode("latin-1")
            declared = found.get(b"content-length", b"")
            if not self.streamed and declared.isdigit() and int(declared) > self.limit:
                self.too_large = True
                message = {**message, "headers": [*headers, (KEPT, b"false")]}
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            self.size += len(chunk)
            if self.size > self.limit:
                self.too_large = True
                self.chunks = []
            elif not self.too_large:
                self.chunks.append(chunk)
            self.complete = not message.get("more_body", False)
        return message

    def result(self) -> KeptResponse | None:
        if not self.complete:
            return None
        if self.too_large:
            return KeptResponse(self.status, self.content_type, None)
        body = b"".join(self.chunks)
        if not self.streamed:
            return KeptResponse(self.status, self.content_type, body)
        return last_event(body)


def last_event(stream: bytes) -> KeptResponse | None:
    """A streamed answer's final ``result`` or ``error`` event, as a JSON answer."""
    for block in reversed(stream.decode("utf-8", errors="replace").split("\n\n")):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        kind, data = fields.get("event"), fields.get("data", "")
        if kind == "result":
            return KeptResponse(200, "application/json", data.encode())
        if kind == "error":  # {"error": ..., "status": N} (api/streaming.py)
            event = json.loads(data)
            code = str(event.get("error", {}).get("code", ""))
            status = event.get("status") or STATUS_BY_CODE.get(code, 500)
            body = json.dumps({"error": event.get("error", {})}).encode()
            return KeptResponse(int(status), "application/json", body)
    return None


async def spool_body(receive: Receive) -> tuple[IO[bytes], int, bytes] | None:
    """The whole request body (in memory, on disk past 1 MiB), its size and SHA-256."""
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)  # noqa: SIM115
    digest = hashlib.sha256()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            spool.close()
            return None
        chunk = message.get("body", b"")
        digest.update(chunk)
        spool.write(chunk)
        if not message.get("more_body", False):
            size = spool.tell()
            spool.seek(0)
            return spool, size, digest.digest()


def replaying(spool: IO[bytes], size: int, receive: Receive) -> Receive:
    """The spooled body again, then the client's own messages (its disconnect)."""
    remaining: int | None = size

    async def replay() -> Message:
        nonlocal remaining
        if remaining is None:
            return await receive()
        chunk = spool.read(min(_CHUNK, remaining))
        remaining -= len(chunk)
        more = remaining > 0 and bool(chunk)
        if not more:
            remaining = None
        return {"type": "http.request", "body": chunk, "more_body": more}

    return replay


async def replay(send: Send, response: KeptResponse, limit: int) -> None:
    if response.body is None:
        msg = (
            "the first request with this Idempotency-Key ran, but its answer was over "
            f"the {limit} bytes kept; it is not run again"
        )
        await send_error(send, IdempotentResultNotKept(msg, limit=limit, unit="bytes"))
        return
    headers = [(REPLAYED, b"true")]
    if response.content_type:
        headers.append((b"content-type", response.content_type.encode("latin-1")))
    await send_answer(send, response.status, response.body, headers)


async def send_error(send: Send, error: SiestaError) -> None:
    body = json.dumps({"error": error.to_dict()}).encode()
    await send_answer(send, status_for(error), body, [(b"content-type", b"application/json")])


async def send_answer(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    length = (b"content-length", str(len(body)).encode())
    await send({"type": "http.response.start", "status": status, "headers": [*headers, length]})
    await send({"type": "http.response.body", "body": body})
