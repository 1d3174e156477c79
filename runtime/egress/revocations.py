"""Which credentials the proxy refuses although their signature is good: those of a
deleted conversation issued before its deletion, and those older than revocations
are kept.

Deleting a conversation records a revocation in the store (``RevocationStore``).
Each proxy reads them in the background every ``poll_seconds``, on from the last
one it saw, and keeps them in memory for ``retention_seconds``: checking a request
reads no store. A credential older than the retention is refused too, so that a
revocation can be forgotten once nothing it revokes could still be accepted.

A proxy reads every kept revocation before it listens, and does not start without
them. Once running, a store it cannot reach costs it nothing it knew: it keeps
serving with what it has, reports each failed read (``revocations_unavailable``),
and catches up from where it left off when the store answers again.

This module imports the store's backends only when it opens one (the proxy starts
fast).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from runtime.core.records import EgressRevocation
from runtime.egress.credentials import EgressClaims
from runtime.seams.stores import NetworkRuleStore, RevocationStore

Emit = Callable[[dict[str, Any]], None]
PAGE = 1000


class RevocationsUnavailable(Exception):
    """The store could not be read when the proxy started."""


@dataclass(frozen=True)
class CredentialRefusal:
    reason: str
    detail: str


class Revocations:
    def __init__(
        self,
        source: RevocationStore | None,
        *,
        retention_seconds: float,
        poll_seconds: float,
        emit: Emit,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._retention = retention_seconds
        self._poll = poll_seconds
        self._emit = emit
        self._clock = clock
        self._revoked: dict[tuple[str, str], float] = {}
        self._position: str | None = None

    def refusal(self, claims: EgressClaims) -> CredentialRefusal | None:
        """Why these (correctly signed) credentials no longer work, if they do not."""
        issued = claims.issued_at
        if issued is None:
            return CredentialRefusal(
                "credentials_expired",
                "these credentials carry no issue time (made by an earlier version); "
                "a new command gets new ones",
            )
        if issued < self._clock() - self._retention:
            return CredentialRefusal(
                "credentials_expired",
                f"these credentials are more than {self._retention:.0f} s old; "
                "a new command gets new ones",
            )
        revoked_at = self._revoked.get((claims.org, claims.conversation))
        if revoked_at is not None and issued <= revoked_at:
            return CredentialRefusal(
                "credentials_revoked",
                f"these credentials are of conversation {claims.conversation}, deleted at "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(revoked_at))}",
            )
        return None

    def __len__(self) -> int:
        return len(self._revoked)

    async def load(self) -> None:
        """Every kept revocation, before the proxy listens."""
        if self._source is None:
            return
        try:
            await self._read()
        except Exception as exc:
            msg = f"the egress proxy cannot read revoked credentials from the store: {exc}"
            raise RevocationsUnavailable(msg) from exc

    async def follow(self, on_revoked: Callable[[list[EgressRevocation]], None]) -> None:
        """Read new revocations every ``poll_seconds`` until cancelled; ``on_revoked``
        gets each batch (the proxy closes what they revoke)."""
        if self._source is None:
            return
        failing = False
        while True:
            await asyncio.sleep(self._poll)
            try:
                new = await self._read()
            except Exception as exc:  # whatever the store raises, the proxy goes on
                failing = True
                self._emit({"event": "revocations_unavailable", "detail": str(exc)})
                continue
            if failing:
                failing = False
                self._emit({"event": "revocations_available", "known": len(self._revoked)})
            if new:
                on_revoked(new)

    async def _read(self) -> list[EgressRevocation]:
        assert self._source is not None
        new: list[EgressRevocation] = []
        while True:
            # The store's client blocks; this loop goes on serving meanwhile.
            page, position = await asyncio.to_thread(
                self._source.egress_revocations, self._position, PAGE
            )
            self._remember(page)
            self._position = position
            new += page
            if len(page) < PAGE:
                break
        self._forget_expired()
        return new

    def _remember(self, revocations: Iterable[EgressRevocation]) -> None:
        for revocation in revocations:
            key = (revocation.org, revocation.conversation)
            self._revoked[key] = max(revocation.revoked_at, self._revoked.get(key, 0.0))

    def _forget_expired(self) -> None:
        """A revocation older than the retention revokes only credentials refused as
        expired anyway: memory stays bounded by the deletions of one retention."""
        oldest = self._clock() - self._retention
        for key in [key for key, at in self._revoked.items() if at < oldest]:
            del self._revoked[key]


def open_source(url: str) -> tuple[RevocationStore, NetworkRuleStore, Callable[[], None]]:
    """The store's revocations and network rules at ``url`` (``sqlite:///path`` or
    ``redis://...``), over one connection, and how to close it."""
    try:
        return _open_source(url)
    except Exception as exc:
        msg = f"the egress proxy cannot open the store of revoked credentials: {exc}"
        raise RevocationsUnavailable(msg) from exc


def _open_source(url: str) -> tuple[RevocationStore, NetworkRuleStore, Callable[[], None]]:
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from pathlib import Path

        from runtime.store.sqlite.db import Database
        from runtime.store.sqlite.network import SqliteNetwork
        from runtime.store.sqlite.revocations import SqliteRevocations

        db = Database(Path(url.removeprefix("sqlite://")))
        return SqliteRevocations(db), SqliteNetwork(db), db.close
    if scheme in ("redis", "rediss", "unix"):
        from runtime.store.redis.client import connect
        from runtime.store.redis.network import RedisNetwork
        from runtime.store.redis.revocations import RedisRevocations

        client = connect(url)
        return RedisRevocations(client), RedisNetwork(client), client.close
    msg = f"no store of revocations at a {scheme!r} URL (sqlite:// or redis://)"
    raise ValueError(msg)
