"""The audit trail: every operator action (who, what, to which, when, from where,
through which surface), kept in the store for ``SIESTA_AUDIT__RETENTION_DAYS``.

The HTTP admin routes and the console record through ``AuditLog.record``; both list
through ``AuditLog.list`` (``GET /v1/admin/audit``, the console's Audit page).
Expired entries are pruned by the instance that records, at most once per
``prune_interval_seconds``: no background job, and a quiet deployment keeps its
last entries until something new happens (they are not lost early, only late).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping

from runtime.admin.settings import AuditSettings
from runtime.core.operator_records import AuditEntry, AuditFilter
from runtime.seams.stores import AuditStore

DAY = 86400.0


class AuditLog:
    def __init__(
        self,
        store: AuditStore,
        settings: AuditSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._pruned_at = 0.0
        self._pruning = threading.Lock()

    def record(
        self,
        actor: str,
        action: str,
        target: str,
        *,
        source: str,
        via: str,
        details: Mapping[str, object] | None = None,
    ) -> AuditEntry:
        entry = AuditEntry(
            entry_id=uuid.uuid4().hex,
            at=self._clock(),
            actor=actor,
            action=action,
            target=target,
            source=source,
            via=via,
            details=dict(details or {}),
        )
        self._store.add_audit(entry)
        self._prune_now_and_then(entry.at)
        return entry

    def list(self, query: AuditFilter) -> list[AuditEntry]:
        return self._store.list_audit(query)

    def prune(self) -> int:
        """Forget what is older than the retention; returns how many entries went."""
        return self._store.prune_audit(self._clock() - self._settings.retention_days * DAY)

    def _prune_now_and_then(self, now: float) -> None:
        if now - self._pruned_at < self._settings.prune_interval_seconds:
            return
        if not self._pruning.acquire(blocking=False):
            return
        try:
            self._pruned_at = now
            self.prune()
        finally:
            self._pruning.release()
