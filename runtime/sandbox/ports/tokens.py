"""Port tokens: who may reach a conversation's ports without the service's bearer token.

A token names its org and is an HMAC, under a key derived from the deployment's
secret, of the org, the conversation and the sandbox's session id: nothing is stored,
every instance checks it alike, and it stops working with that sandbox (deleting the
conversation, or a sandbox made afresh, retires it). It opens every port of that
one sandbox and nothing else: the path's conversation must be the one it was made for.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

PREFIX = "spt1"
"""Marks (and versions) a port token."""


@dataclass(frozen=True)
class PortGrant:
    org: str
    conversation: str
    session_id: str


class PortTokens:
    def __init__(self, deployment_secret: bytes) -> None:
        # Its own key: a port token is never a valid egress credential, or the reverse.
        self._key = hmac.new(deployment_secret, b"siesta ports v1", hashlib.sha256).digest()

    def issue(self, grant: PortGrant) -> str:
        org = base64.urlsafe_b64encode(grant.org.encode()).decode().rstrip("=")
        return f"{PREFIX}.{org}.{self._mac(grant)}"

    def org_of(self, token: str) -> str | None:
        """The org a well-formed token names (not yet checked: see ``verify``)."""
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != PREFIX or len(parts[1]) > 256:
            return None
        try:
            return base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None

    def verify(self, token: str, grant: PortGrant) -> bool:
        return hmac.compare_digest(token.encode(), self.issue(grant).encode())

    def _mac(self, grant: PortGrant) -> str:
        message = f"{grant.org}/{grant.conversation}/{grant.session_id}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
