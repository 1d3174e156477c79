"""Transitions of a session's sandbox: pause, stop, retire, mark lost, and noting
what happened to a sandbox outside the service (stopped, paused by someone else).

Each is done by a holder of the conversation's lease and written with its
fence; a transition that ends a running sandbox also stops counting it against
capacity. Used by reconciliation (idle tiers, faults) and by capacity (LRU
suspension).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace

from runtime.core.errors import SiestaError
from runtime.core.records import SessionRecord, SessionStatus
from runtime.seams.providers import SandboxProvider
from runtime.seams.stores import CapacityStore, SessionStore
from runtime.sessions.leases import Lease
from runtime.sessions.settings import CapacitySettings

log = logging.getLogger(__name__)


def capacity_scopes(settings: CapacitySettings, org: str, user: str) -> list[tuple[str, int]]:
    """The scopes a running sandbox of (org, user) counts against, with their limits."""
    return [
        (f"org:{org}", settings.max_active_per_org),
        (f"user:{org}/{user}", settings.max_active_per_user),
        (f"host:{settings.host_id}", settings.max_active_per_host),
    ]


class Lifecycle:
    def __init__(
        self,
        sessions: SessionStore,
        slots: CapacityStore,
        provider: SandboxProvider,
        capacity: CapacitySettings,
    ) -> None:
        self._sessions = sessions
        self._slots = slots
        self._provider = provider
        self._capacity = capacity

    def release_slots(self, member: str, org: str, user: str) -> None:
        scopes = [scope for scope, _ in capacity_scopes(self._capacity, org, user)]
        self._slots.release_slot(member, scopes)

    def pause(self, record: SessionRecord, lease: Lease) -> bool:
        self._provider.lifecycle.pause(record.sandbox_id)
        return self._write(record, SessionStatus.PAUSED, lease)

    def stop(self, record: SessionRecord, lease: Lease) -> bool:
        self._provider.lifecycle.stop(record.sandbox_id)
        return self._write(record, SessionStatus.STOPPED, lease, frees_slot=True)

    def retire(self, record: SessionRecord, lease: Lease) -> bool:
        with contextlib.suppress(SiestaError):
            self._provider.lifecycle.destroy(record.sandbox_id)
        return self._write(record, SessionStatus.RETIRED, lease, frees_slot=True)

    def note_stopped(self, record: SessionRecord, lease: Lease) -> bool:
        """The sandbox stopped (or vanished, its workspace kept) without the service: the
        session is stopped, off capacity, and its next operation starts it again."""
        return self._write(record, SessionStatus.STOPPED, lease, frees_slot=True)

    def note_paused(self, record: SessionRecord, lease: Lease) -> bool:
        """Someone else paused the sandbox: it still holds its memory and its slot."""
        return self._write(record, SessionStatus.PAUSED, lease)

    def mark_lost(self, record: SessionRecord, lease: Lease) -> bool:
        with contextlib.suppress(SiestaError):
            self._provider.lifecycle.destroy(record.sandbox_id)  # whatever part of it is left
        return self._write(record, SessionStatus.LOST, lease, frees_slot=True)

    def _write(
        self,
        record: SessionRecord,
        status: SessionStatus,
        lease: Lease,
        *,
        frees_slot: bool = False,
    ) -> bool:
        if not self._sessions.put_session(replace(record, status=status, fence=lease.fence)):
            return False
        if frees_slot:
            self.release_slots(record.key, record.org, record.user)
        log.info("session %s of %s is now %s", record.session_id, record.key, status.value)
        return True
