"""envd, E2B's in-sandbox API, at ``/e2b/envd``: one address for every sandbox.

The SDKs (``E2B_SANDBOX_URL=http://HOST:PORT/e2b/envd``) name the sandbox in the
``E2b-Sandbox-Id`` header and prove they may use it with ``X-Access-Token`` (the
token create and connect returned). The dispatcher checks both, then hands the
call to the Connect services (``process.Process``, ``filesystem.Filesystem``) or
to the plain HTTP routes (``/health``, ``/files``). A sandbox that is not there
(killed, timed out, another's, paused) answers 502 "... was not found", which the
SDKs read as "not running".
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from anyio import to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from siesta_contract.text import ID_MAX_CHARS, ID_PATTERN

from api.deps import through_door
from api.e2b.errors import e2b_error, refuse
from api.e2b.signed import RecentSandboxes, signed_by
from runtime.core.records import E2bSandbox
from runtime.e2b.sandboxes import E2bSandboxes
from runtime.sandbox.user_files import AsUser
from runtime.services import Services


@dataclass(frozen=True)
class EnvdCall:
    """Who an envd call is for: the sandbox, and the user it runs as."""

    sandbox: E2bSandbox
    user: str

    @property
    def who(self) -> AsUser:
        """File operations of this call: in the sandbox's conversation, as its user,
        relative paths from the user's home."""
        return AsUser(E2bSandboxes.context(self.sandbox), self.user)

    def at_door(
        self,
        services: Services,
        function: str,
        arguments: Mapping[str, Any],
        run: Callable[[], T],
        content: bytes = b"",
    ) -> T:
        """``run`` as the door function ``function`` of the sandbox's conversation,
        asked for by the token that made the sandbox (its policy, its log entry)."""
        ctx = E2bSandboxes.context(self.sandbox)
        with through_door(services, ctx, self.sandbox.owner, function, arguments, content):
            return run()


T = TypeVar("T")
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
SANDBOX_ID = re.compile(ID_PATTERN)
"""What a sandbox id can be (a conversation id, at most ``ID_MAX_CHARS``)."""
CALL: ContextVar[EnvdCall] = ContextVar("e2b_envd_call")
"""Set by the dispatcher for the services and routes it calls (same task)."""


class EnvdDispatcher:
    def __init__(self, process: ASGIApp, filesystem: ASGIApp, http: ASGIApp) -> None:
        self._process = process
        self._filesystem = filesystem
        self._http = http
        self._recent = RecentSandboxes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        services: Services = scope["app"].state.services
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        method, path = str(scope["method"]), str(scope["path"])
        try:  # the sandbox's record is in the store: looked up off the event loop
            if path.endswith("/files") and "signature" in query and "x-access-token" not in headers:
                call = await to_thread.run_sync(
                    signed_call, services, headers, method, query, self._recent
                )
            else:
                call = await to_thread.run_sync(authorize, services, headers)
        except Exception as exc:
            await e2b_error(exc)(scope, receive, send)
            return
        CALL.set(call)
        if "/process.Process/" in path:
            await self._process(scope, receive, send)
        elif "/filesystem.Filesystem/" in path:
            await self._filesystem(scope, receive, send)
        else:
            await self._http(scope, receive, send)


def authorize(services: Services, headers: dict[str, str]) -> EnvdCall:
    sandbox_id = headers.get("e2b-sandbox-id", "")
    if sandbox_id and not (len(sandbox_id) <= ID_MAX_CHARS and SANDBOX_ID.fullmatch(sandbox_id)):
        # No sandbox has such an id: a bad request, not "not running" (502).
        raise refuse(400, "the E2b-Sandbox-Id header is not a sandbox id")
    sandbox = services.e2b.find(sandbox_id) if sandbox_id else None
    if sandbox is None or not serving(sandbox):
        raise refuse(502, f"The sandbox {sandbox_id or '(no E2b-Sandbox-Id header)'} was not found")
    token = headers.get("x-access-token", "")
    if not hmac.compare_digest(token.encode(), sandbox.access_token.encode()):
        raise refuse(401, "a valid X-Access-Token for this sandbox is required")
    return EnvdCall(sandbox, user_of(headers) or services.settings.e2b.default_user)


def signed_call(
    services: Services,
    headers: dict[str, str],
    method: str,
    query: dict[str, str],
    recent: RecentSandboxes,
) -> EnvdCall:
    """A file URL signed with a sandbox's access token instead of carrying it
    (``api.e2b.signed``): the sandbox named, else whichever running one signed it."""
    sandbox_id = headers.get("e2b-sandbox-id", "")
    if sandbox_id:
        named = services.e2b.find(sandbox_id)
        if named is None or not serving(named):
            raise refuse(502, f"The sandbox {sandbox_id} was not found")
        sandbox = signed_by(method, query, [named])
    else:
        found = recent.find(
            lambda: [s for s in services.e2b.running_everywhere() if serving(s)],
            lambda listed: signed_by(method, query, listed),
        )
        # The list may be half a second old: the sandbox as it is now must serve.
        sandbox = services.e2b.find(found.sandbox_id) if found is not None else None
        if sandbox is not None and not serving(sandbox):
            raise refuse(502, f"The sandbox {sandbox.sandbox_id} was not found")
    if sandbox is None:
        raise refuse(401, "invalid signature")
    user = checked_user(query.get("username", "")) or services.settings.e2b.default_user
    return EnvdCall(sandbox, user)


def serving(sandbox: E2bSandbox) -> bool:
    """Running, and not past its timeout: from its end on it is not there for envd
    calls, as on E2B, even if the sweep that kills (or pauses) it has not come yet."""
    return sandbox.state == "running" and sandbox.end_at > time.time()


def user_of(headers: dict[str, str]) -> str | None:
    """The user of ``Authorization: Basic base64("user:")`` (the SDKs' ``user=``)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise refuse(401, "the Authorization header is not Basic base64 of 'user:'") from exc
    return checked_user(decoded.split(":", 1)[0]) or None


def checked_user(user: str) -> str:
    if user and not USER_NAME.fullmatch(user):
        raise refuse(401, f"no user {user[:40]!r} in this sandbox")
    return user
