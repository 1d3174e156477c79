"""Safe retries: the ``Idempotency-Key`` header on every mutating ``/v1`` route.

The first request with a key runs and its answer is kept in the store (so every
instance sharing the store sees it); a retry with the same key and the same
request gets that answer again, marked ``Idempotent-Replayed: true``, and nothing
runs a second time. Keys are scoped by token and org; the request is its method,
path, query, every ``X-Siesta-*`` header (org, user, agent, egress narrowing, base
image...: each shapes what the call does) and body (hashed).

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
outside ``/v1``, a sandbox's ports and methods no route takes (404, 405) are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import IO, TypeVar

from anyio import CapacityLimiter, to_thread
from fastapi.routing import iter_route_contexts
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import status_for
from api.idempotency_answers import (
    Capture,
    keeps,
    replay,
    replaying,
    send_answer,
    send_error,
    spool_body,
    unknown_outcome,
)
from api.openapi import document as openapi_document
from runtime.core.context import RetryKey
from runtime.core.errors import (
    IdempotencyKeyReused,
    InvalidIdempotencyKey,
    OutcomeUnknown,
    SessionBusy,
    SiestaError,
)
from runtime.core.records import IdempotencyClaim, KeptResponse, conversation_key
from runtime.sessions.idempotency import IdempotencyKeys

HEADER = b"idempotency-key"
METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KEY_MAX_CHARS = 255
_KEY = re.compile(rb"[\x21-\x7e]{1,%d}" % KEY_MAX_CHARS)
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
EXECUTE = "/v1/tools/execute"
_NAMED_IN_BODY_MAX_BYTES = 1024 * 1024
"""A larger ``/v1/tools/execute`` body is not read for its conversation (its key then
stays until its TTL after the conversation is deleted)."""
_CONVERSATION_PATH = re.compile(r"^/v1/conversations/([^/]+)(/|$)")
_PORT_PATH = re.compile(r"^/v1/conversations/[^/]+/ports/")
"""A sandbox's port: the server there has its own rules (and the header goes to it)."""


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
        if caller is None or await _lacks_required_header(scope, route, headers):  # refused
            await self.app(scope, receive, send)
            return
        if not _KEY.fullmatch(key):
            msg = f"Idempotency-Key must be 1 to {KEY_MAX_CHARS} visible ASCII characters"
            await send_error(
                send, InvalidIdempotencyKey(msg, limit=KEY_MAX_CHARS, unit="characters")
            )
            return
        body = await spool_body(receive)
        if body is None:
            return  # the client went away before its body arrived
        spool, size, body_digest = body
        with spool:
            org = headers.get(b"x-siesta-org", b"")
            request = [
                scope["method"].encode(),
                scope["path"].encode(),
                scope.get("query_string", b""),
            ]
            fingerprint = _digest(*request, *_context_headers(scope), body_digest)
            scoped = f"{caller.name}/{_digest(org, key)}"
            run = _Run(self, services.idempotency_keys, scoped)
            run.conversation = _conversation(scope, org, spool, size)
            run.taken_over_safely = (scope["method"], route) in TAKEN_OVER_SAFELY
            await run(scope, replaying(spool, size, receive), send, fingerprint)

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
        keys: IdempotencyKeys,
        key: str,
    ) -> None:
        self.middleware = middleware
        self.settings = keys.settings
        self.keys = keys
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
                    lambda: self.keys.claim(self.key, fingerprint, self.owner, self.conversation)
                )
            except SiestaError as error:
                await send_error(send, error)
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
                await send_error(send, IdempotencyKeyReused(msg))
                return
            if entry.response is not None:
                await replay(send, entry.response, self.settings.max_response_bytes)
                return
            if time.monotonic() >= deadline:
                limit = self.settings.wait_seconds
                msg = f"the first request with this Idempotency-Key still runs after {limit} s"
                await send_error(send, SessionBusy(msg, limit=limit, unit="seconds"))
                return
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        capture = Capture(self.settings.max_response_bytes)

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
        await send_answer(send, status_for(error), body, [(b"content-type", b"application/json")])
        await self._settle(KeptResponse(status_for(error), "application/json", body))

    async def _settle(self, kept: KeptResponse | None) -> None:
        with contextlib.suppress(SiestaError):  # the answer went out; a lost key only re-runs
            if kept is not None and (keeps(kept.status) or unknown_outcome(kept)):
                await self.middleware.in_thread(
                    lambda: self.keys.complete(self.key, self.owner, kept)
                )
            else:
                await self.middleware.in_thread(lambda: self.keys.release(self.key, self.owner))

    async def _renew(self) -> None:
        hold = self.settings.hold_seconds
        while True:
            await asyncio.sleep(hold / 3)
            with contextlib.suppress(SiestaError):
                await self.middleware.in_thread(lambda: self.keys.renew(self.key, self.owner))


def _idempotency_key(scope: Scope) -> bytes | None:
    if scope["type"] != "http" or scope["method"] not in METHODS:
        return None
    if not str(scope["path"]).startswith("/v1/") or _PORT_PATH.match(str(scope["path"])):
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


def _context_headers(scope: Scope) -> list[bytes]:
    """Every ``X-Siesta-*`` header, in a fixed order: a retry that changes any of
    them is another request (its checks must run), not a replay."""
    found = [
        name.lower() + b":" + value
        for name, value in scope["headers"]
        if name.lower().startswith(b"x-siesta-")
    ]
    return sorted(found)


async def _lacks_required_header(scope: Scope, route: str, headers: dict[bytes, bytes]) -> bool:
    """A header the OpenAPI document requires is missing: the route answers 400 and
    runs nothing, whether or not the key came with another request."""
    paths = (await openapi_document(scope["app"])).get("paths", {})
    operation = paths.get(route, {}).get(str(scope["method"]).lower(), {})
    return any(
        parameter.get("in") == "header"
        and parameter.get("required")
        and not headers.get(str(parameter["name"]).lower().encode("latin-1"))
        for parameter in operation.get("parameters", [])
    )


def _conversation(scope: Scope, org: bytes, body: IO[bytes], size: int) -> str | None:
    """``org/conversation`` of a call for a conversation (its path's, or the one
    ``/v1/tools/execute`` names), unless it deletes it: the key goes with it."""
    found = _CONVERSATION_PATH.match(str(scope["path"]))
    if found is not None and scope["method"] != "DELETE":
        return conversation_key(org.decode("latin-1"), found.group(1))
    if scope["path"] != EXECUTE or size > _NAMED_IN_BODY_MAX_BYTES:
        return None
    try:
        named = json.loads(body.read()).get("conversationId")
    except (ValueError, AttributeError):
        named = None  # the route answers the bad body
    finally:
        body.seek(0)
    return conversation_key(org.decode("latin-1"), named) if isinstance(named, str) else None


def _bearer(authorization: bytes) -> str:
    scheme, _, token = authorization.decode("latin-1").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()
