"""Signed file URLs: ``sandbox.download_url(...)`` and ``upload_url(...)`` of the SDKs.

A secured sandbox's files can be fetched or sent without its access token in a
header, by a URL that carries a signature of what it may do instead (a browser, a
``curl``, another service). E2B's v1 signature is
``"v1_" + base64(sha256("PATH:OPERATION:USER:TOKEN[:EXPIRATION]"))`` without padding,
where OPERATION is ``read`` (GET) or ``write`` (POST), USER the ``username`` query
parameter (empty: the default user) and EXPIRATION, when given, the Unix time after
which the URL is refused (401 "signature is already expired").

The SDK builds the URL from the sandbox's envd address: on the host form
(``49983-ID.DOMAIN``) it names its sandbox; on a path form (``E2B_SANDBOX_URL``) it is
``ORIGIN/files?...``, naming none. There the signature itself tells the sandbox: it
is checked against each running sandbox's token (a hash each; no token, no match),
the list of them read at most twice a second (``RecentSandboxes``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from api.e2b.errors import refuse
from runtime.core.records import E2bSandbox

OPERATIONS = {"GET": "read", "POST": "write"}


def signature(path: str, operation: str, user: str, token: str, expiration: int | None) -> str:
    raw = f"{path}:{operation}:{user}:{token}"
    if expiration is not None:
        raw += f":{expiration}"
    digest = hashlib.sha256(raw.encode()).digest()
    return "v1_" + base64.b64encode(digest).rstrip(b"=").decode("ascii")


def signed_by(
    method: str,
    query: Mapping[str, str],
    candidates: Iterable[E2bSandbox],
    clock: Callable[[], float] = time.time,
) -> E2bSandbox | None:
    """The sandbox whose token signed this request (among ``candidates``), ``None``
    when none did; a 401 saying why for a URL that cannot be good (expired, no path)."""
    given = query.get("signature", "")
    path = query.get("path", "")
    operation = OPERATIONS.get(method)
    if operation is None or not path:
        raise refuse(401, "a signed URL is for GET or POST /files with a path")
    expiration: int | None = None
    if "signature_expiration" in query:
        try:
            expiration = int(query["signature_expiration"])
        except ValueError as exc:
            raise refuse(401, "signature_expiration is not a Unix time") from exc
        if expiration < clock():
            raise refuse(401, "signature is already expired")
    user = query.get("username", "")
    for sandbox in candidates:
        expected = signature(path, operation, user, sandbox.access_token, expiration)
        if hmac.compare_digest(expected.encode(), given.encode()):
            return sandbox
    return None


class RecentSandboxes:
    """The running sandboxes a signature is checked against when the URL names none:
    read from the store at most every ``refresh_seconds`` (a URL anyone can send must
    not make every request read every sandbox), and again when none matched and the
    list is older than that (a sandbox made a moment ago)."""

    def __init__(self, refresh_seconds: float = 0.5) -> None:
        self._refresh = refresh_seconds
        self._listed: list[E2bSandbox] = []
        self._at = -math.inf
        self._lock = threading.Lock()

    def find(
        self,
        load: Callable[[], list[E2bSandbox]],
        match: Callable[[list[E2bSandbox]], E2bSandbox | None],
    ) -> E2bSandbox | None:
        with self._lock:
            listed, fresh = self._listed, time.monotonic() - self._at < self._refresh
        found = match(listed)
        if found is not None or fresh:
            return found
        with self._lock:
            if time.monotonic() - self._at >= self._refresh:
                self._listed, self._at = load(), time.monotonic()
            listed = self._listed
        return match(listed)
