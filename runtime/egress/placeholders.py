"""What a sandbox holds instead of a secret: a placeholder only this conversation's
requests, through the proxy, to the hosts its binding names, turn into the value.

Derived (HMAC under the deployment's egress key) rather than stored, so the service
that puts it in a command's environment and any proxy that replaces it agree with
no lookup; it names no secret and reveals nothing of the value."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "siesta-secret-"


def placeholder(key: bytes, org: str, conversation: str, secret: str) -> str:
    mac = hmac.new(key, f"placeholder\0{org}\0{conversation}\0{secret}".encode(), hashlib.sha256)
    return PREFIX + mac.hexdigest()[:40]
