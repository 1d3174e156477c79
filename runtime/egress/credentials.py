"""Who is asking the egress proxy: signed credentials in the proxy URL.

Every command gets ``http://<user>:<password>@proxy:port`` in its environment.
The user part carries the conversation and the agent's narrowing of the
allowlist; the password is an HMAC of it under the deployment's egress key. The
proxy needs nothing but the key to know whom a request is for and what it may
reach, so any number of proxies (one per service instance, or a Kubernetes
Deployment) serve any sandbox of the deployment. A sandbox can read its own
credentials, which grant nothing its commands do not already have.

They also carry when they were issued (``i``, unix seconds to the millisecond): a
conversation's deletion revokes the credentials issued before it, and credentials
older than the revocations are kept are refused (``runtime/egress/revocations.py``).
Credentials of the same ``s1.`` format without ``i`` (made before revocations
existed) still verify, and the proxy refuses them as expired.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import time
from dataclasses import dataclass

PREFIX = "s1."
"""Version of the format, so a later one can be told apart."""


@dataclass(frozen=True)
class EgressClaims:
    org: str
    conversation: str
    narrowed_to: tuple[str, ...] | None = None
    """The agent's allowlist entries, or ``None`` when the agent does not narrow."""
    issued_at: float | None = None
    """When they were signed (unix seconds); ``None``: credentials made before they said."""


def sign(key: bytes, claims: EgressClaims) -> tuple[str, str]:
    """(user, password) for a proxy URL: URL-safe as they are. Issued now, unless
    ``claims.issued_at`` says otherwise."""
    issued = time.time() if claims.issued_at is None else claims.issued_at
    body: dict[str, str | float | list[str]] = {"o": claims.org, "c": claims.conversation}
    if claims.narrowed_to is not None:
        body["a"] = list(claims.narrowed_to)
    # Rounded down: a credential never says it was issued after it was.
    body["i"] = math.floor(issued * 1000) / 1000
    payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    user = PREFIX + base64.urlsafe_b64encode(payload).decode().rstrip("=")
    return user, _mac(key, user)


def verify(key: bytes, user: str, password: str) -> EgressClaims | None:
    """The claims, when ``password`` is the key's signature of ``user``."""
    if not hmac.compare_digest(_mac(key, user), password):
        return None
    if not user.startswith(PREFIX):
        return None
    encoded = user[len(PREFIX) :]
    try:
        body = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        narrowed = body.get("a")
        issued = body.get("i")
        return EgressClaims(
            str(body["o"]),
            str(body["c"]),
            tuple(str(entry) for entry in narrowed) if narrowed is not None else None,
            float(issued) if issued is not None else None,
        )
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


def basic_credentials(header_value: str) -> tuple[str, str] | None:
    """(user, password) of a ``Proxy-Authorization: Basic ...`` header."""
    scheme, _, encoded = header_value.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (ValueError, binascii.Error):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def _mac(key: bytes, user: str) -> str:
    return hmac.new(key, user.encode(), hashlib.sha256).hexdigest()
