"""Operators' console sessions, kept in the store.

Signing in with a token that has the ``admin`` scope, bound to no org, makes a
``ConsoleSession``: its random id goes to the browser (``api/console/auth.py`` puts it
in a cookie) and only its SHA-256 to the store, so every instance sharing the store
knows it and a copy of the store signs nobody in. Each look-up checks that its token
is still configured (by the token's digest) with the ``admin`` scope: a token taken
out ends its sessions.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

from runtime.core.auth import Caller, TokenRegistry, token_digest
from runtime.core.operator_records import ConsoleSession
from runtime.core.settings import ConsoleSettings, Scope
from runtime.seams.stores import ConsoleSessionStore

SCOPE: Scope = "admin"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def console_capable(caller: Caller) -> bool:
    """The console shows and changes every org's sandboxes and approvals: it takes the
    ``admin`` scope and a token bound to no org."""
    return caller.may(SCOPE) and not caller.bound


class ConsoleSessions:
    def __init__(
        self,
        store: ConsoleSessionStore,
        tokens: TokenRegistry,
        settings: ConsoleSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._tokens = tokens
        self._settings = settings
        self._clock = clock

    def admin_caller(self, token: str) -> Caller | None:
        """The caller whose token this is, when it may use the console."""
        caller = self._tokens.identify(token) if token else None
        return caller if caller is not None and console_capable(caller) else None

    def open(self, caller: Caller, token: str, source: str) -> tuple[str, ConsoleSession]:
        """A new session for ``caller`` (signed in with ``token``): its id, and the
        record the store keeps under the id's digest."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        session = ConsoleSession(
            id_digest=_digest(session_id),
            csrf=secrets.token_urlsafe(32),
            token_name=caller.name,
            token_digest=token_digest(token),
            created_at=now,
            expires_at=now + self._settings.session_hours * 3600,
            source=source,
        )
        self._store.put_console_session(session)
        return session_id, session

    def live(self, session_id: str | None) -> ConsoleSession | None:
        """The session of this id, while it lasts and its token is still an admin's."""
        if not session_id:
            return None
        session = self._store.get_console_session(_digest(session_id), self._clock())
        if session is None:
            return None
        caller = self._tokens.by_digest(session.token_digest)
        if caller is None or caller.name != session.token_name or not console_capable(caller):
            self._store.delete_console_session(session.id_digest)
            return None
        return session

    def end(self, session: ConsoleSession) -> None:
        self._store.delete_console_session(session.id_digest)
