"""Revoked credentials at the proxy: a deleted conversation's credentials stop working
at a running proxy within the poll interval, its open connections are closed, a
conversation made again with the same id works, old credentials expire, and a store
that cannot be read stops nothing the proxy knew."""

from __future__ import annotations

import asyncio
import base64
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.core.network_rules import Allowlist
from runtime.core.records import EgressRevocation
from runtime.egress.credentials import EgressClaims, sign
from runtime.egress.proxy import EgressProxy, ProxyConfig
from runtime.egress.revocations import RevocationsUnavailable
from runtime.egress.server import config_from_json, config_to_json, serve
from runtime.seams.stores import Stores
from runtime.store.redis import open_redis
from runtime.store.sqlite import open_sqlite
from tests.helpers import free_port, wait_until
from tests.redis_server import RedisServer
from tests.runtime.egress.test_proxy import KEY, LOOPBACK, RunningProxy

POLL = 0.2
DAY = 86400.0


@dataclass
class Store:
    url: str
    stores: Stores

    def revoke(self, org: str, conversation: str, at: float | None = None) -> float:
        at = time.time() if at is None else at
        self.stores.revocations.revoke_egress(EgressRevocation(org, conversation, at), DAY)
        return at


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The service's store, as the proxy reads it: another connection to it."""
    if request.param == "sqlite":
        path = tmp_path / "siesta.db"
        subject = Store(f"sqlite://{path}", open_sqlite(path))
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        subject = Store(server.url, open_redis(server.url))
    yield subject
    subject.stores.close()


def config(
    origin: int, store_url: str | None, *, poll: float = POLL, retention: float = DAY
) -> ProxyConfig:
    return ProxyConfig(
        key=KEY,
        allow=Allowlist.parse([f"origin.test:{origin}"]),
        port=0,
        hosts={"origin.test": "127.0.0.1"},
        allowed_private_networks=LOOPBACK,
        store_url=store_url,
        revocation_poll_seconds=poll,
        revocation_retention_seconds=retention,
    )


@pytest.fixture
def proxy(origin: int, store: Store) -> Iterator[RunningProxy]:
    running = RunningProxy(config(origin, store.url))
    yield running
    running.close()


def get(proxy: RunningProxy, origin: int, claims: EgressClaims) -> tuple[int, str, str]:
    return proxy.exchange(f"GET http://origin.test:{origin}/ HTTP/1.1", claims=claims)


def refused(proxy: RunningProxy, origin: int, claims: EgressClaims) -> bool:
    """Whether a request with these credentials is refused as revoked now. A request
    in flight when the revocation arrives is cut (the proxy closes a deleted
    conversation's open connections) before it is answered: not refused yet."""
    try:
        return get(proxy, origin, claims)[0] == 407
    except ConnectionAbortedError:
        return False


def issued(org: str, conversation: str, at: float | None = None) -> EgressClaims:
    return EgressClaims(org, conversation, issued_at=time.time() if at is None else at)


def test_a_deleted_conversations_credentials_are_refused_within_the_poll_interval(
    proxy: RunningProxy, store: Store, origin: int
) -> None:
    copied = issued("org-a", "conv-a")  # taken out of the sandbox before the deletion
    other = issued("org-a", "conv-b")
    same_id_elsewhere = issued("org-b", "conv-a")
    assert get(proxy, origin, copied)[0] == 200

    deleted_at = store.revoke("org-a", "conv-a")
    started = time.monotonic()
    assert wait_until(lambda: refused(proxy, origin, copied), timeout=10 * POLL)
    assert time.monotonic() - started < POLL + 1.0

    status, head, body = get(proxy, origin, copied)
    assert status == 407
    assert "X-Siesta-Egress-Refusal: credentials_revoked" in head
    assert "of conversation conv-a, deleted at" in body
    assert proxy.events[-1]["event"] == "refused"
    assert (proxy.events[-1]["org"], proxy.events[-1]["conversation"]) == ("org-a", "conv-a")
    # Other conversations, and the id in another org, are untouched.
    assert get(proxy, origin, other)[0] == 200
    assert get(proxy, origin, same_id_elsewhere)[0] == 200
    # The id used again: a new conversation, with new credentials that work.
    assert get(proxy, origin, issued("org-a", "conv-a", deleted_at + 0.001))[0] == 200


def test_a_second_deletion_revokes_what_the_first_left_working(
    proxy: RunningProxy, store: Store, origin: int
) -> None:
    first = store.revoke("org-a", "conv-a")
    second_life = issued("org-a", "conv-a", first + 1)
    assert wait_until(lambda: refused(proxy, origin, issued("org-a", "conv-a", first)))
    assert get(proxy, origin, second_life)[0] == 200
    store.revoke("org-a", "conv-a", first + 2)
    assert wait_until(lambda: refused(proxy, origin, second_life), timeout=10 * POLL)


def test_a_proxy_knows_earlier_revocations_before_it_listens(store: Store, origin: int) -> None:
    store.revoke("org-a", "conv-a")
    running = RunningProxy(config(origin, store.url, poll=3600))
    try:
        assert get(running, origin, issued("org-a", "conv-a", time.time() - 1))[0] == 407
    finally:
        running.close()


def tunnel(proxy: RunningProxy, origin: int, claims: EgressClaims) -> socket.socket:
    token = base64.b64encode(":".join(sign(KEY, claims)).encode()).decode()
    conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    auth = f"Proxy-Authorization: Basic {token}"
    conn.sendall(f"CONNECT origin.test:{origin} HTTP/1.1\r\n{auth}\r\n\r\n".encode())
    assert conn.recv(4096).startswith(b"HTTP/1.1 200")
    return conn


def closed(conn: socket.socket) -> bool:
    try:
        return conn.recv(4096) == b""
    except ConnectionResetError:
        return True


def still_open(conn: socket.socket) -> bool:
    conn.sendall(b"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n")
    return b"200" in conn.recv(4096)


def test_open_connections_of_a_deleted_conversation_are_closed(
    proxy: RunningProxy, store: Store, origin: int
) -> None:
    revoked = tunnel(proxy, origin, issued("org-a", "conv-a"))
    kept = tunnel(proxy, origin, issued("org-a", "conv-b"))
    try:
        store.revoke("org-a", "conv-a")
        revoked.settimeout(POLL + 2.0)
        assert closed(revoked)
        assert still_open(kept)
        assert {"event": "closed", "conversation": "conv-a"}.items() <= next(
            e for e in proxy.events if e["event"] == "closed"
        ).items()
    finally:
        revoked.close()
        kept.close()


def test_old_credentials_are_refused_so_that_revocations_can_expire(origin: int) -> None:
    running = RunningProxy(config(origin, None, retention=60))
    try:
        status, head, body = get(running, origin, issued("org-a", "conv-a", time.time() - 61))
        assert status == 407
        assert "X-Siesta-Egress-Refusal: credentials_expired" in head
        assert "more than 60 s old; a new command gets new ones" in body
        assert get(running, origin, issued("org-a", "conv-a", time.time() - 59))[0] == 200
    finally:
        running.close()


def test_revocations_older_than_the_retention_are_forgotten(store: Store, origin: int) -> None:
    store.revoke("org-a", "old", time.time() - 120)
    store.revoke("org-a", "new")
    running = RunningProxy(config(origin, store.url, retention=60))
    try:
        assert len(running.proxy.revocations) == 1
    finally:
        running.close()


def test_an_unreadable_store_keeps_what_the_proxy_knew(tmp_path: Path, origin: int) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    stores = open_redis(server.url)
    revoked = issued("org-a", "conv-a")
    running = RunningProxy(config(origin, server.url))
    try:
        Store(server.url, stores).revoke("org-a", "conv-a")
        assert wait_until(lambda: refused(running, origin, revoked))
        server.stop()

        assert wait_until(
            lambda: any(e["event"] == "revocations_unavailable" for e in running.events)
        )
        assert "not reachable" in next(
            e["detail"] for e in running.events if e["event"] == "revocations_unavailable"
        )
        other = issued("org-a", "conv-b")
        assert get(running, origin, revoked)[0] == 407
        assert get(running, origin, other)[0] == 200

        server.start()  # same port, same data: the proxy reads on from where it was
        Store(server.url, stores).revoke("org-a", "conv-b")
        assert wait_until(lambda: refused(running, origin, other))
        assert wait_until(
            lambda: any(e["event"] == "revocations_available" for e in running.events)
        )
    finally:
        running.close()
        stores.close()
        server.stop()


def test_a_proxy_does_not_start_without_the_revocations(origin: int) -> None:
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    proxy = EgressProxy(config(origin, unreachable), print)

    async def start() -> None:
        try:
            await proxy.start()
        finally:
            await proxy.close()

    with pytest.raises(RevocationsUnavailable, match="cannot read revoked credentials"):
        asyncio.run(start())

    events: list[dict[str, object]] = []
    until: asyncio.Future[None] | None = None

    async def run() -> None:
        nonlocal until
        until = asyncio.get_running_loop().create_future()
        await serve(config(origin, unreachable), events.append, until)

    with pytest.raises(SystemExit):
        asyncio.run(run())
    assert events[0]["event"] == "error"
    assert "cannot read revoked credentials" in str(events[0]["detail"])


def test_the_service_hands_its_child_the_store_on_stdin(origin: int) -> None:
    sent = config(origin, "redis://:secret@redis.internal:6379/0", retention=99)
    assert config_from_json(config_to_json(sent)) == sent
