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

from runtime.core.context import check_id
from runtime.core.errors import InvalidContext, MissingContext, OrgNotAllowed, UserNotAllowed
from runtime.core.settings import ANY_ORG, LEGACY_TOKEN_NAME, SCOPES, Scope, TokenSettings

MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused by ``tokens hash`` (and ``SIESTA_API_TOKEN``'s setting)."""


@dataclass(frozen=True)
class Caller:
    """The holder of one configured token: what it may do (scopes) and for whom (the
    orgs and the user its token is bound to). Every face asks it, and only it, which
    org and user a call acts for."""

    name: str
    scopes: frozenset[Scope]
    org: str | None = None
    """The one org its token is bound to (``None``: not bound to one)."""
    orgs: frozenset[str] | None = None
    """The orgs it may name per call (``None``: any)."""
    user: str | None = None
    """The one user its token is bound to (``None``: any, named per call)."""

    def may(self, scope: Scope) -> bool:
        return scope in self.scopes

    @property
    def bound(self) -> bool:
        """Whether the token is limited to some orgs (not a many-org backend's)."""
        return self.orgs is not None

    def allows_org(self, org: str) -> bool:
        return self.orgs is None or org in self.orgs

    def org_for(self, named: str | None, where: str = "X-Siesta-Org") -> str:
        """The org a call acts in: the one it names (``where``), which the token must
        allow, else the token's own org. 403 ``org_not_allowed`` names the token's."""
        if not named:
            if self.org is not None:
                return self.org
            msg = f"this call must name its org ({where}): token {self.name!r} has no org"
            raise MissingContext(msg, headers=[where])
        check_id(named, f"organisation id ({where})", InvalidContext)
        if not self.allows_org(named):
            raise self.not_allowed(named)
        return named

    def not_allowed(self, org: str) -> OrgNotAllowed:
        allowed = self.org or ", ".join(sorted(self.orgs or ()))
        msg = (
            f"token {self.name!r} acts in org {allowed!r} only; it may not act in org {org[:140]!r}"
        )
        return OrgNotAllowed(msg, org=allowed, token=self.name)

    def user_for(self, named: str | None) -> str | None:
        """The user a call acts for: the one it names, which must be the token's user
        when it has one (403 ``user_not_allowed``), else the token's (``None``: the
        call named none and the token has none)."""
        if not named:
            return self.user
        if self.user is not None and named != self.user:
            msg = (
                f"token {self.name!r} acts for user {self.user!r} only; "
                f"it may not act for user {named[:140]!r}"
            )
            raise UserNotAllowed(msg, user=self.user, token=self.name)
        return named

    def every_org(self, what: str) -> None:
        """Refuse a deployment-wide route (the operators' catalog, the console, every
        org's approvals) to a token bound to some orgs."""
        if self.bound:
            allowed = self.org or ", ".join(sorted(self.orgs or ()))
            msg = f"{what} spans every org; token {self.name!r} is bound to {allowed!r}"
            raise OrgNotAllowed(msg, org=allowed, token=self.name)


def caller_of(token: TokenSettings) -> Caller:
    """The caller a configured token identifies."""
    if token.org is not None:
        orgs: frozenset[str] | None = frozenset({token.org})
    elif token.orgs is None or ANY_ORG in token.orgs:
        orgs = None
    else:
        orgs = frozenset(token.orgs)
    org = token.org or (next(iter(orgs)) if orgs is not None and len(orgs) == 1 else None)
    return Caller(token.name, frozenset(token.scopes), org, orgs, token.user)


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
        entries = [(token.sha256, caller_of(token)) for token in tokens]
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
