"""Safe retries: the ``Idempotency-Key`` header on every mutating ``/v1`` route.

The first request with a key runs and its answer is kept in the store (so every
instance sharing the store sees it); a retry with the same key and the same
request gets that answer again, marked ``Idempotent-Replayed: true``, and nothing
runs a second time. Keys are scoped by token and org; the request is its method,
path, query, ``X-Siesta-Org``, ``X-Siesta-User`` and body (hashed).

* the same key with another request: 409 ``idempotency_key_reused`` (a request
  missing a header its route requires is not keyed: the route answers 400);
* a retry while the first still runs waits for its answer up to
  ``SIESTA_IDEMPOTENCY__WAIT_SECONDS``, then 409 ``session_busy`` (with ``limit``);
* answers that say "try again" (5xx, 409, a cancelled call) are not kept: the key
  is free again, so the retry runs, unless the first run handed a command to its
  sandbox (see below);
* when the instance running the first request dies, its claim lapses after
  ``SIESTA_IDEMPOTENCY__HOLD_SECONDS`` and a retry takes it over. What it does then
  depends on the route: a command (``runCommand``) is never started again: the
  retry collects the first run's result from the sandbox's agent (waiting for it
  if it still runs), or answers 409 ``outcome_unknown`` when the sandbox no longer
  knows it; routes that are safe to run again (reading, writing a whole file,
  listing, deleting, validating) run again; every other route answers
  ``outcome_unknown`` rather than guess whether the first run did its work. An
  ``outcome_unknown`` answer is kept like a final one;
* an answer over ``SIESTA_IDEMPOTENCY__MAX_RESPONSE_BYTES`` is not kept
  (``Idempotency-Kept: false`` when its size is known up front); a retry gets 409
  ``idempotency_result_not_kept`` and is not run;
* a streamed answer (``text/event-stream``) passes through untouched; what is kept
  is its last event as a JSON answer (``result``: 200 with its data; ``error``:
  the code's status with ``{"error": ...}``), which is what a retry gets.

Pure ASGI middleware, so streamed answers are not held back. ``/mcp``, paths
outside ``/v1`` and methods no route takes (404, 405) are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import IO, TypeVar

from anyio import CapacityLimiter, to_thread
from fastapi.routing import iter_route_contexts
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import STATUS_BY_CODE, status_for
from runtime.core.context import RetryKey
from runtime.core.errors import (
    IdempotencyKeyReused,
    IdempotentResultNotKept,
    InvalidIdempotencyKey,
    OutcomeUnknown,
    SessionBusy,
    SiestaError,
)
from runtime.core.records import IdempotencyClaim, KeptResponse, conversation_key
from runtime.core.settings import IdempotencySettings
from runtime.store.base import IdempotencyStore

HEADER = b"idempotency-key"
REPLAYED = b"idempotent-replayed"
KEPT = b"idempotency-kept"
METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KEY_MAX_CHARS = 255
_KEY = re.compile(rb"[\x21-\x7e]{1,%d}" % KEY_MAX_CHARS)
_SPOOL_IN_MEMORY = 1024 * 1024
_CHUNK = 64 * 1024
_STORE_THREADS = 8
_T = TypeVar("_T")
RETRY_STATE = "siesta.retry"
"""Where a keyed request's ``RetryKey`` waits for the route (``scope["state"]``)."""
CONVERSATION = "/v1/conversations/{conversation_id}"
TAKEN_OVER_SAFELY = frozenset(
    {
        # Collects the first run's result from the sandbox itself.
        ("POST", CONVERSATION + "/sandbox/runCommand"),
        # Running them again does no harm.
        ("POST", CONVERSATION + "/sandbox/readFile"),
        ("POST", CONVERSATION + "/sandbox/writeFile"),
        ("POST", CONVERSATION + "/sandbox/listFiles"),
        ("DELETE", CONVERSATION),
        ("POST", "/v1/images/validate"),
        ("POST", "/v1/tools/catalog"),
        ("POST", "/v1/admin/reconcile"),
    }
)
"""Routes whose request may be taken over from an instance that died running it."""
_CONVERSATION_PATH = re.compile(r"^/v1/conversations/([^/]+)(/|$)")


def keeps(status: int) -> bool:
    """Whether an answer is final: "try again" answers leave the key free."""
    return status < 500 and status not in (409, 499)


class Idempotency:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._limiter: CapacityLimiter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _idempotency_key(scope)
        route = _route(scope) if key is not None else None
        if key is None or route is None:
            await self.app(scope, receive, send)
            return
        services = scope["app"].state.services
        headers = dict(scope["headers"])
        caller = services.tokens.identify(_bearer(headers.get(b"authorization", b"")))
        if caller is None or _lacks_required_header(scope, route, headers):  # the route refuses it
            await self.app(scope, receive, send)
            return
        if not _KEY.fullmatch(key):
            msg = f"Idempotency-Key must be 1 to {KEY_MAX_CHARS} visible ASCII characters"
            await _error(send, InvalidIdempotencyKey(msg, limit=KEY_MAX_CHARS, unit="characters"))
            return
        body = await _spool_body(receive)
        if body is None:
            return  # the client went away before its body arrived
        spool, size, body_digest = body
        with spool:
            org = headers.get(b"x-siesta-org", b"")
            user = headers.get(b"x-siesta-user", b"")
            request = [
                scope["method"].encode(),
                scope["path"].encode(),
                scope.get("query_string", b""),
            ]
            fingerprint = _digest(*request, org, user, body_digest)
            scoped = f"{caller.name}/{_digest(org, key)}"
            run = _Run(self, services.settings.idempotency, services.stores.idempotency, scoped)
            run.conversation = _conversation(scope, org)
            run.taken_over_safely = (scope["method"], route) in TAKEN_OVER_SAFELY
            await run(scope, _replaying(spool, size, receive), send, fingerprint)

    async def in_thread(self, work: Callable[[], _T]) -> _T:
        # Own threads: the sandbox handlers may hold every thread of the default pool.
        if self._limiter is None:
            self._limiter = CapacityLimiter(_STORE_THREADS)
        return await to_thread.run_sync(work, limiter=self._limiter)


class _Run:
    """One request with a key: claim it (or wait, or replay), run, keep the answer."""

    def __init__(
        self,
        middleware: Idempotency,
        settings: IdempotencySettings,
        store: IdempotencyStore,
        key: str,
    ) -> None:
        self.middleware = middleware
        self.settings = settings
        self.store = store
        self.key = key
        self.owner = uuid.uuid4().hex
        self.conversation: str | None = None
        """``org/conversation`` of a conversation route: its deletion forgets the key."""
        self.taken_over_safely = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send, fingerprint: str) -> None:
        deadline = time.monotonic() + self.settings.wait_seconds
        pause = 0.02
        while True:
            try:
                entry = await self.middleware.in_thread(
                    lambda: self.store.claim_key(
                        self.key,
                        fingerprint,
                        self.owner,
                        self.settings.hold_seconds,
                        ttl=self.settings.ttl_seconds,
                        conversation=self.conversation,
                    )
                )
            except SiestaError as error:
                await _error(send, error)
                return
            if isinstance(entry, IdempotencyClaim):
                if entry.attempt > 1 and not self.taken_over_safely:
                    await self._unknown(send)
                    return
                retry = RetryKey(self.key, self.owner, entry.attempt, entry.dispatched)
                scope.setdefault("state", {})[RETRY_STATE] = retry
                await self._run(scope, receive, send)
                return
            if entry.fingerprint != fingerprint:
                msg = "this Idempotency-Key came with another request (method, path or body)"
                await _error(send, IdempotencyKeyReused(msg))
                return
            if entry.response is not None:
                await _replay(send, entry.response, self.settings.max_response_bytes)
                return
            if time.monotonic() >= deadline:
                limit = self.settings.wait_seconds
                msg = f"the first request with this Idempotency-Key still runs after {limit} s"
                await _error(send, SessionBusy(msg, limit=limit, unit="seconds"))
                return
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        capture = _Capture(self.settings.max_response_bytes)

        async def capturing_send(message: Message) -> None:
            await send(capture.see(message))

        renewal = asyncio.ensure_future(self._renew())
        kept: KeptResponse | None = None
        try:
            await self.middleware.app(scope, receive, capturing_send)
            kept = capture.result()
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            await self._settle(kept)

    async def _unknown(self, send: Send) -> None:
        """A taken-over request that cannot be run again safely: say so, and keep that."""
        msg = (
            "the first request with this Idempotency-Key was being run by a service "
            "instance that stopped before it answered; whether it did its work is not "
            "known, so it is not run again: check its effects, and send a new key to run it"
        )
        error = OutcomeUnknown(msg)
        body = json.dumps({"error": error.to_dict()}).encode()
        await _send(send, status_for(error), body, [(b"content-type", b"application/json")])
        await self._settle(KeptResponse(status_for(error), "application/json", body))

    async def _settle(self, kept: KeptResponse | None) -> None:
        ttl = self.settings.ttl_seconds
        with contextlib.suppress(SiestaError):  # the answer went out; a lost key only re-runs
            if kept is not None and (keeps(kept.status) or _unknown_outcome(kept)):
                await self.middleware.in_thread(
                    lambda: self.store.complete_key(self.key, self.owner, kept, ttl)
                )
            else:
                await self.middleware.in_thread(
                    lambda: self.store.release_key(self.key, self.owner)
                )

    async def _renew(self) -> None:
        hold = self.settings.hold_seconds
        while True:
            await asyncio.sleep(hold / 3)
            with contextlib.suppress(SiestaError):
                await self.middleware.in_thread(
                    lambda: self.store.renew_key(self.key, self.owner, hold)
                )


class _Capture:
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
        return _last_event(body)


def _last_event(stream: bytes) -> KeptResponse | None:
    """A streamed answer's final ``result`` or ``error`` event, as a JSON answer."""
    for block in reversed(stream.decode("utf-8", errors="replace").split("\n\n")):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        kind, data = fields.get("event"), fields.get("data", "")
        if kind == "result":
            return KeptResponse(200, "application/json", data.encode())
        if kind == "error":
            code = str(json.loads(data).get("error", {}).get("code", ""))
            return KeptResponse(STATUS_BY_CODE.get(code, 500), "application/json", data.encode())
    return None


def _idempotency_key(scope: Scope) -> bytes | None:
    if scope["type"] != "http" or scope["method"] not in METHODS:
        return None
    if not str(scope["path"]).startswith("/v1/"):
        return None
    for name, value in scope["headers"]:
        if name == HEADER:
            return bytes(value)
    return None


def _route(scope: Scope) -> str | None:
    """The path template of the route that takes this method at this path (``None``:
    none does, and the app answers 404 or 405 itself)."""
    for route in iter_route_contexts(scope["app"].routes):
        if route.matches(scope)[0] is Match.FULL:
            return str(route.path)
    return None


def _lacks_required_header(scope: Scope, route: str, headers: dict[bytes, bytes]) -> bool:
    """A header the OpenAPI document requires is missing: the route answers 400 and
    runs nothing, whether or not the key came with another request."""
    paths = scope["app"].openapi().get("paths", {})
    operation = paths.get(route, {}).get(str(scope["method"]).lower(), {})
    return any(
        parameter.get("in") == "header"
        and parameter.get("required")
        and not headers.get(str(parameter["name"]).lower().encode("latin-1"))
        for parameter in operation.get("parameters", [])
    )


def _conversation(scope: Scope, org: bytes) -> str | None:
    """``org/conversation`` when a conversation route is not deleting it."""
    found = _CONVERSATION_PATH.match(str(scope["path"]))
    if found is None or scope["method"] == "DELETE":
        return None
    return conversation_key(org.decode("latin-1"), found.group(1))


def _unknown_outcome(kept: KeptResponse) -> bool:
    if kept.status != 409 or kept.body is None:
        return False
    with contextlib.suppress(ValueError, LookupError, TypeError):
        return bool(json.loads(kept.body)["error"]["code"] == OutcomeUnknown.code)
    return False


def _bearer(authorization: bytes) -> str:
    scheme, _, token = authorization.decode("latin-1").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


async def _spool_body(receive: Receive) -> tuple[IO[bytes], int, bytes] | None:
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


def _replaying(spool: IO[bytes], size: int, receive: Receive) -> Receive:
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


async def _replay(send: Send, response: KeptResponse, limit: int) -> None:
    if response.body is None:
        msg = (
            "the first request with this Idempotency-Key ran, but its answer was over "
            f"the {limit} bytes kept; it is not run again"
        )
        await _error(send, IdempotentResultNotKept(msg, limit=limit, unit="bytes"))
        return
    headers = [(REPLAYED, b"true")]
    if response.content_type:
        headers.append((b"content-type", response.content_type.encode("latin-1")))
    await _send(send, response.status, response.body, headers)


async def _error(send: Send, error: SiestaError) -> None:
    body = json.dumps({"error": error.to_dict()}).encode()
    await _send(send, status_for(error), body, [(b"content-type", b"application/json")])


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    length = (b"content-length", str(len(body)).encode())
    await send({"type": "http.response.start", "status": status, "headers": [*headers, length]})
    await send({"type": "http.response.body", "body": body})
