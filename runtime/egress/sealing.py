"""Secrets at rest: sealed with the operator's key (AES-256-GCM), opened only by the
egress proxy, at the moment it puts one in a request.

The key is the operator's (``SIESTA_EGRESS__SECRETS_KEY``), never the store's: a copy
of the store (a backup, a Redis replica) holds nothing usable. Each sealed value is
bound to its org and name (GCM's associated data), so a value cannot be moved to
another org or name in the store and opened there.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "v1."
"""Version of the format, so that a later one (another cipher) can be told apart."""
NONCE_BYTES = 12


class SealedSecretUnreadable(Exception):
    """Not sealed with this key (the key changed), or tampered with."""


class SecretSealer:
    def __init__(self, operator_key: str) -> None:
        """``operator_key``: any string of 32 characters or more (random: 256 bits are
        spread over it by HKDF)."""
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"siesta egress secrets v1"
        ).derive(operator_key.encode())
        self._aead = AESGCM(derived)

    def seal(self, org: str, name: str, value: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, value, _bound_to(org, name))
        return PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, org: str, name: str, sealed: str) -> bytes:
        if not sealed.startswith(PREFIX):
            msg = f"secret {name!r}: unknown sealing format"
            raise SealedSecretUnreadable(msg)
        raw = base64.b64decode(sealed[len(PREFIX) :])
        try:
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _bound_to(org, name))
        except InvalidTag as exc:
            msg = f"secret {name!r} of org {org!r} was not sealed with this key"
            raise SealedSecretUnreadable(msg) from exc


def _bound_to(org: str, name: str) -> bytes:
    return f"{org}\0{name}".encode()
