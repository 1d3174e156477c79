"""Port tokens: who may reach a conversation's ports without the service's bearer token.

A token names its org and is an HMAC, under a key derived from the deployment's
secret, of the org, the conversation and the sandbox's session id: nothing is stored,
every instance checks it alike, and it stops working with that sandbox (deleting the
conversation, or a sandbox made afresh, retires it). It opens every port of that
one sandbox and nothing else: the path's conversation must be the one it was made for.

Previews' host form (``PORT-LABEL.DOMAIN``) names no conversation: its label is an
HMAC of org and conversation (24 base32 letters, 120 bits; lowercase, as DNS does not
keep case), unguessable without the secret and the same for the conversation's every
sandbox. A label cannot be turned back, so a preview token names the conversation
too (``spv1.ORG.CONVERSATION.MAC``, the port token's MAC) and the host's label must be
that conversation's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass

PREFIX = "spt1"
"""Marks (and versions) a port token."""
PREVIEW_PREFIX = "spv1"
"""Marks (and versions) a preview token."""
LABEL_LETTERS = 24


@dataclass(frozen=True)
class PortGrant:
    org: str
    conversation: str
    session_id: str


class PortTokens:
    def __init__(self, deployment_secret: bytes) -> None:
        # Its own key: a port token is never a valid egress credential, or the reverse.
        self._key = hmac.new(deployment_secret, b"siesta ports v1", hashlib.sha256).digest()
        labels = hmac.new(deployment_secret, b"siesta previews v1", hashlib.sha256)
        self._label_key = labels.digest()

    def issue(self, grant: PortGrant) -> str:
        return f"{PREFIX}.{_b64(grant.org)}.{self._mac(grant)}"

    def issue_preview(self, grant: PortGrant) -> str:
        return f"{PREVIEW_PREFIX}.{_b64(grant.org)}.{_b64(grant.conversation)}.{self._mac(grant)}"

    def org_of(self, token: str) -> str | None:
        """The org a well-formed token names (not yet checked: see ``verify``)."""
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != PREFIX:
            return None
        return _unb64(parts[1])

    def named_by_preview(self, token: str) -> tuple[str, str] | None:
        """The org and conversation a well-formed preview token names (not yet checked)."""
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != PREVIEW_PREFIX:
            return None
        org, conversation = _unb64(parts[1]), _unb64(parts[2])
        return None if org is None or conversation is None else (org, conversation)

    def verify(self, token: str, grant: PortGrant) -> bool:
        made = self.issue_preview(grant) if token.startswith(PREVIEW_PREFIX) else self.issue(grant)
        return hmac.compare_digest(token.encode(), made.encode())

    def label(self, org: str, conversation: str) -> str:
        """The conversation's label in a preview host name."""
        digest = hmac.new(self._label_key, f"{org}/{conversation}".encode(), hashlib.sha256)
        return base64.b32encode(digest.digest()).decode().lower()[:LABEL_LETTERS]

    def _mac(self, grant: PortGrant) -> str:
        message = f"{grant.org}/{grant.conversation}/{grant.session_id}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


LABEL = re.compile(f"[a-z2-7]{{{LABEL_LETTERS}}}")


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(part: str) -> str | None:
    if len(part) > 256:
        return None
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
