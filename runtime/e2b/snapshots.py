"""E2B's snapshots and forks on Siesta's (``runtime/sandbox/snapshots``).

An E2B snapshot is a Siesta snapshot of the sandbox's conversation; its id is a
template id: ``Sandbox.create(template=<snapshot id>)`` starts a sandbox from it
(``E2bSandboxes``), ``Sandbox.delete_snapshot`` deletes it (E2B deletes a template).
A fork is a snapshot taken for it alone (not counted against the org's limit,
deleted once the forks have started) and one new sandbox per requested fork, each
with the source's template, metadata, environment and timeout behaviour.
"""

from __future__ import annotations

import logging

from runtime.core.errors import SiestaError
from runtime.core.records import E2bSandbox, SnapshotRecord
from runtime.e2b.sandboxes import E2bSandboxes
from runtime.sandbox.snapshots import SnapshotNotFound, Snapshots

log = logging.getLogger(__name__)

SOURCE_KEY = "e2b.sandboxID"
"""The metadata a snapshot taken through E2B carries: the sandbox it was taken of."""


class E2bSnapshots:
    def __init__(self, sandboxes: E2bSandboxes, snapshots: Snapshots) -> None:
        self._sandboxes = sandboxes
        self._snapshots = snapshots

    def take(self, org: str, sandbox_id: str, name: str | None) -> SnapshotRecord:
        sandbox = self._sandboxes.get(org, sandbox_id)
        return self._snapshots.take(self._sandboxes.context(sandbox), name)

    def find(self, org: str, sandbox_id: str | None, name: str | None) -> list[SnapshotRecord]:
        found = self._snapshots.list(org, sandbox_id)
        return [s for s in found if name is None or name in (s.name, s.snapshot_id)]

    def delete(self, org: str, snapshot_id: str) -> bool:
        try:
            self._snapshots.delete(org, snapshot_id.split(":", 1)[0])
        except SnapshotNotFound:
            return False
        return True

    def fork(
        self, org: str, owner: str, sandbox_id: str, count: int, timeout_seconds: int | None
    ) -> list[E2bSandbox | SiestaError]:
        """``count`` new sandboxes from the source as it is now; each may fail alone."""
        source = self._sandboxes.get(org, sandbox_id)
        snapshot = self._snapshots.take(self._sandboxes.context(source), counted=False)
        made: list[E2bSandbox | SiestaError] = []
        try:
            for _ in range(count):
                try:
                    sandbox, _ = self._sandboxes.create(
                        org,
                        owner,
                        snapshot.snapshot_id,
                        timeout_seconds=timeout_seconds,
                        metadata=source.metadata,
                        env_vars=source.env_vars,
                        auto_pause=source.on_timeout == "pause",
                    )
                    made.append(sandbox)
                except SiestaError as error:
                    made.append(error)
        finally:
            self._snapshots.delete(org, snapshot.snapshot_id)
        log.info("e2b sandbox %s of %s forked %d times", sandbox_id, org, count)
        return made
