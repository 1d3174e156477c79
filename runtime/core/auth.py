"""Bearer tokens: who is calling, and which scopes its token has.

Tokens are configured as SHA-256 digests (``SIESTA_TOKENS``); ``SIESTA_API_TOKEN``
is the one token kept as text, for compatibility, and has every scope. A fast hash
is enough because tokens are long random strings, not passwords: no dictionary
reaches them, and a slow hash would only cost every request.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import SecretStr

from runtime.core.settings import LEGACY_TOKEN_NAME, SCOPES, Scope, TokenSettings

MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused by ``tokens hash`` (and ``SIESTA_API_TOKEN``'s setting)."""


@dataclass(frozen=True)
class Caller:
    """The holder of one configured token."""

    name: str
    scopes: frozenset[Scope]
    org: str | None = None
    """The org its token is bound to (the E2B API's org); ``None``: the default."""

    def may(self, scope: Scope) -> bool:
        return scope in self.scopes


def token_digest(token: str) -> str:
    """Hex SHA-256 of the token's UTF-8 bytes: what ``SIESTA_TOKENS`` holds."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenRegistry:
    def __init__(self, entries: list[tuple[str, Caller]]) -> None:
        self._entries = [(bytes.fromhex(digest), caller) for digest, caller in entries]

    @classmethod
    def from_settings(
        cls, tokens: Sequence[TokenSettings], api_token: SecretStr | None
    ) -> TokenRegistry:
        """``SIESTA_TOKENS`` and ``SIESTA_API_TOKEN``."""
        entries = [
            (token.sha256, Caller(token.name, frozenset(token.scopes), token.org))
            for token in tokens
        ]
        if api_token is not None:
            digest = token_digest(api_token.get_secret_value())
            entries.append((digest, Caller(LEGACY_TOKEN_NAME, frozenset(SCOPES))))
        return cls(entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def identify(self, presented: str) -> Caller | None:
        """The caller whose token this is, or ``None``.

        Every configured digest is compared, in constant time, whatever matched
        before: the time taken says nothing about which token (or how much of
        one) was right.
        """
        return self._find(hashlib.sha256(presented.encode()).digest())

    def by_digest(self, digest: str) -> Caller | None:
        """The caller whose token has this hex SHA-256 (a console session keeps the
        digest, never the token), or ``None``: compared as ``identify`` compares."""
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            return None
        return self._find(raw)

    def _find(self, digest: bytes) -> Caller | None:
        found = None
        for expected, caller in self._entries:
            if hmac.compare_digest(digest, expected):
                found = caller
        return found
