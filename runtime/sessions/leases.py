"""Per-conversation leases: one sandbox operation per conversation at a time,
across every service instance.

A lease has a random owner token, a TTL and a fence (from one counter that
only grows). While an operation runs, a background thread renews the lease;
if renewing fails until the lease would have run out, the lease is *lost*:
the operation's ``on_lost`` hook stops what it runs in the sandbox (before
another instance can take over), and its writes are refused by their fence.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from runtime.core import tracing
from runtime.core.clock import SYSTEM_CLOCK, Clock
from runtime.core.errors import LeaseExpired, SessionBusy, StateUnavailable
from runtime.seams.stores import LeaseStore
from runtime.sessions.settings import LeaseSettings


@dataclass
class Lease:
    key: str
    owner: str
    fence: int
    ttl: float
    lost: threading.Event = field(default_factory=threading.Event)


def lease_expired(lease: Lease) -> LeaseExpired:
    """The error of an operation whose lease was lost (or taken over) before it ended."""
    msg = (
        "this operation lost the conversation's lease (it could not be renewed within "
        f"the lease TTL of {lease.ttl:g} seconds); its result was discarded"
    )
    return LeaseExpired(msg, limit=lease.ttl, unit="seconds")


class Leases:
    def __init__(
        self, store: LeaseStore, settings: LeaseSettings, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock

    def owner(self, key: str) -> str | None:
        """Who holds ``key``'s lease right now (``None``: free)."""
        return self._store.lease_owner(key)

    def clear_expired(self) -> int:
        """Drop leases whose holders died; how many were dropped."""
        return self._store.clear_expired_leases()

    @contextlib.contextmanager
    def hold(
        self, key: str, on_lost: Callable[[], None] | None = None, *, wait: bool = True
    ) -> Iterator[Lease]:
        """Hold ``key``'s lease for the block, renewing it in the background."""
        with tracing.span("lease.wait", conversation_key=key):
            lease = self._acquire(key, wait=wait)
        renewer = _Renewer(self._store, self._clock, lease, on_lost)
        try:
            yield lease
        finally:
            renewer.stop()
            with contextlib.suppress(StateUnavailable):
                self._store.release_lease(key, lease.owner)

    def try_hold(self, key: str) -> contextlib.AbstractContextManager[Lease]:
        """Like ``hold`` but never waits: ``SessionBusy`` at once if taken."""
        return self.hold(key, wait=False)

    def _acquire(self, key: str, *, wait: bool) -> Lease:
        owner = uuid.uuid4().hex
        ttl = self._settings.ttl_seconds
        limit = self._settings.wait_seconds if wait else 0.0
        deadline = self._clock.now() + limit
        while True:
            fence = self._store.acquire_lease(key, owner, ttl)
            if fence is not None:
                return Lease(key, owner, fence, ttl)
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                msg = (
                    f"another operation on this conversation is still running; "
                    f"waited the limit of {limit:g} seconds"
                )
                raise SessionBusy(msg, limit=limit, unit="seconds")
            self._store.wait_for_release(key, remaining)


class _Renewer:
    """Renews a lease every third of its TTL; declares it lost in time."""

    def __init__(
        self,
        store: LeaseStore,
        clock: Clock,
        lease: Lease,
        on_lost: Callable[[], None] | None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._lease = lease
        self._on_lost = on_lost
        self._stop = threading.Event()
        # Counted on this host's monotonic clock from before the acquire
        # returned, so it never ends later than the store's own expiry.
        self._valid_until = clock.now() + lease.ttl
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.key}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ttl = self._lease.ttl
        # Give up a quarter TTL early, so on_lost finishes before anyone else can hold it.
        margin = ttl / 4
        while True:
            until_deadline = self._valid_until - margin - self._clock.now()
            if self._clock.wait(self._stop, max(0.0, min(ttl / 3, until_deadline))):
                return
            started = self._clock.now()
            try:
                renewed: bool | None = self._store.renew_lease(
                    self._lease.key, self._lease.owner, ttl
                )
            except StateUnavailable:
                renewed = None  # unknown: retry until the deadline
            if renewed:
                self._valid_until = started + ttl
            elif renewed is False or self._clock.now() >= self._valid_until - margin:
                self._declare_lost()
                return

    def _declare_lost(self) -> None:
        self._lease.lost.set()
        if self._on_lost is not None:
            self._on_lost()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
