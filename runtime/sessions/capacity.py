"""Capacity: limits on active (running) sandboxes per org, per user and per host.

A running sandbox is counted as a member of three scopes in the store, all at
once and atomically (``CapacityStore.claim_slot``), so two instances can never both
take the last slot. When a scope is full, the least recently used idle session
in it that nobody holds a lease on is suspended (stopped) to make room; only
when none can be freed does the call fail with ``capacity_unavailable``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from runtime.core.errors import CapacityUnavailable, SessionBusy, SiestaError
from runtime.core.records import SessionRecord, SessionStatus
from runtime.seams.stores import CapacityStore, SessionStore
from runtime.sessions.leases import Leases
from runtime.sessions.lifecycle import Lifecycle, capacity_scopes
from runtime.sessions.settings import CapacitySettings

log = logging.getLogger(__name__)

POOL_SLOT_PREFIX = "pool:"
"""Slots the warm pool's members hold (``runtime/sessions/pool.py``)."""

# Each round frees at most one slot; a few rounds cover races with other instances.
MAX_CLAIM_ROUNDS = 5


class Quotas:
    def __init__(
        self,
        slots: CapacityStore,
        sessions: SessionStore,
        leases: Leases,
        lifecycle: Lifecycle,
        settings: CapacitySettings,
        evict_pool_member: Callable[[str], bool] = lambda _: False,
    ) -> None:
        self._slots = slots
        self._sessions = sessions
        self._leases = leases
        self._lifecycle = lifecycle
        self._settings = settings
        self._evict_pool_member = evict_pool_member

    def scopes(self, org: str, user: str) -> list[tuple[str, int]]:
        return capacity_scopes(self._settings, org, user)

    def claim(self, member: str, org: str, user: str) -> None:
        """Count a conversation as active, suspending an idle one if a scope is full."""
        scopes = self.scopes(org, user)
        full = 0
        for _ in range(MAX_CLAIM_ROUNDS):
            claimed = self._slots.claim_slot(member, scopes)
            if claimed is None:
                return
            full = claimed
            if not self._free_one(scopes[full][0], exclude=member):
                break
        scope, limit = scopes[full]
        kind = scope.split(":", 1)[0]
        msg = (
            f"the {kind} limit of {limit} active sandboxes is reached ({scope}) and no idle "
            "session could be suspended; try again later"
        )
        raise CapacityUnavailable(msg, scope=kind, limit=limit, unit="sandboxes")

    def release(self, record: SessionRecord) -> None:
        """Stop counting the record's conversation anywhere."""
        self._lifecycle.release_slots(record.key, record.org, record.user)

    def release_member(self, member: str, org: str, user: str) -> None:
        self._lifecycle.release_slots(member, org, user)

    def _free_one(self, scope: str, *, exclude: str) -> bool:
        candidates = []
        members = self._slots.slot_members(scope)
        # A warm-pool member is the cheapest room there is: nobody uses it yet.
        if any(self._evict_pool_member(m) for m in members if m.startswith(POOL_SLOT_PREFIX)):
            return True
        for member in members:
            if member == exclude or member.startswith(POOL_SLOT_PREFIX):
                continue
            org, conversation = member.split("/", 1)
            record = self._sessions.get_session(org, conversation)
            if record is None:
                if self._leases.owner(member) is None:
                    # Counted but has no session (a provisioning that died): repair.
                    self._slots.release_slot(member, [scope])
                    return True
                continue
            if record.status in (SessionStatus.ACTIVE, SessionStatus.PAUSED):
                candidates.append(record)
        for record in sorted(candidates, key=lambda r: r.last_used_at):
            if self._suspend(record):
                return True
        return False

    def _suspend(self, record: SessionRecord) -> bool:
        try:
            with self._leases.try_hold(record.key) as lease:
                fresh = self._sessions.get_session(record.org, record.conversation)
                if fresh is None or fresh.session_id != record.session_id:
                    return False
                if fresh.status not in (SessionStatus.ACTIVE, SessionStatus.PAUSED):
                    return False
                try:
                    return self._lifecycle.stop(fresh, lease)
                except SiestaError:
                    return False
        except SessionBusy:
            return False
