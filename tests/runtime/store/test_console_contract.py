"""Console sessions on both backends: kept under the digest of the cookie's id, found
until they expire, ended by a deletion."""

from __future__ import annotations

import time
from dataclasses import replace

from runtime.core.operator_records import ConsoleSession
from runtime.seams.stores import Stores

NOW = time.time()  # Redis expires the key on its own clock: near real time
SESSION = ConsoleSession(
    id_digest="a" * 64,
    csrf="csrf-token",
    token_name="operator",
    token_digest="b" * 64,
    created_at=NOW,
    expires_at=NOW + 3600,
    source="10.0.0.7",
)


def test_a_session_is_found_by_its_digest_until_it_expires(store: Stores) -> None:
    store.console.put_console_session(SESSION)
    other = replace(SESSION, id_digest="c" * 64, token_name="other")
    store.console.put_console_session(other)

    assert store.console.get_console_session(SESSION.id_digest, NOW) == SESSION
    assert store.console.get_console_session(other.id_digest, NOW + 3599) == other
    assert store.console.get_console_session(SESSION.id_digest, NOW + 3600) is None
    assert store.console.get_console_session("d" * 64, NOW) is None


def test_a_deleted_session_is_gone_and_no_other_with_it(store: Stores) -> None:
    other = replace(SESSION, id_digest="c" * 64)
    store.console.put_console_session(SESSION)
    store.console.put_console_session(other)

    assert store.console.delete_console_session(SESSION.id_digest)
    assert not store.console.delete_console_session(SESSION.id_digest)
    assert store.console.get_console_session(SESSION.id_digest, NOW) is None
    assert store.console.get_console_session(other.id_digest, NOW) == other


def test_an_expired_session_is_not_kept(store: Stores) -> None:
    """Redis drops the key at the session's end; SQLite when the next session is kept."""
    ended = replace(SESSION, created_at=NOW - 7200, expires_at=NOW - 3600)
    store.console.put_console_session(ended)
    store.console.put_console_session(replace(SESSION, id_digest="c" * 64))

    assert store.console.get_console_session(ended.id_digest, NOW - 3601) is None
    assert not store.console.delete_console_session(ended.id_digest)
