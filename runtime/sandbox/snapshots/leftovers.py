"""Clean-up of snapshot images and workspace copies that no record names: taken by
a call that failed half way or whose instance died, a fork's image once the fork is
gone, a snapshot deleted while sandboxes made from it still ran. One more sweep of
every reconciliation pass."""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime.seams.providers import SandboxLifecycle
from runtime.seams.stores import SnapshotStore


class SnapshotLeftovers:
    name = "snapshot leftovers"

    def __init__(
        self,
        store: SnapshotStore,
        lifecycle: SandboxLifecycle,
        grace_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._lifecycle = lifecycle
        self._grace = grace_seconds
        self._clock = clock

    def run(self) -> dict[str, list[str]]:
        leftovers = self._lifecycle.list_snapshot_leftovers()
        if not leftovers:
            return {}
        recorded = self._store.snapshot_ids()
        settled = self._clock() - self._grace
        removed = []
        unrecorded = [
            leftover.snapshot_id
            for leftover in leftovers
            if leftover.snapshot_id not in recorded and leftover.created_at < settled
        ]
        for snapshot_id in unrecorded:
            # An image still in use stays (the engine refuses): tried again next pass.
            if self._lifecycle.delete_snapshot(snapshot_id):
                removed.append(snapshot_id)
        return {"snapshot_leftovers_removed": removed} if removed else {}
