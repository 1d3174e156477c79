"""E2B's snapshots and forks on Siesta's (``runtime/sandbox/snapshots``).

An E2B snapshot is a Siesta snapshot of the sandbox's conversation; its id is a
template id: ``Sandbox.create(template=<snapshot id>)`` starts a sandbox from it
(``E2bSandboxes``), ``Sandbox.delete_snapshot`` deletes it (E2B deletes a template).
A fork is ``Snapshots.fork``, as ``/v1``'s: one snapshot that is never recorded (so
never listed nor counted against the org's limit; clean-up removes it if the
instance dies half way), the last fork taking its workspace copy as its own disk. Each
fork is a new sandbox of the caller with the source's template, metadata,
environment, timeout behaviour, public or private ports and network rules, all
recorded before the fork is made (as ``E2bSandboxes.create`` does).
"""

from __future__ import annotations

import logging

from runtime.core.errors import SiestaError
from runtime.core.records import E2bSandbox, SnapshotRecord
from runtime.e2b.sandboxes import E2bSandboxes, SandboxNotFound
from runtime.sandbox.snapshots import SnapshotNotFound, Snapshots

log = logging.getLogger(__name__)

SOURCE_KEY = "e2b.sandboxID"
"""The metadata a snapshot taken through E2B carries: the sandbox it was taken of."""


class E2bSnapshots:
    def __init__(self, sandboxes: E2bSandboxes, snapshots: Snapshots) -> None:
        self._sandboxes = sandboxes
        self._snapshots = snapshots

    def take(
        self, org: str, sandbox_id: str, name: str | None, *, memory: bool = False
    ) -> SnapshotRecord:
        sandbox = self._sandboxes.get(org, sandbox_id)
        context = self._sandboxes.context(sandbox)
        return self._snapshots.take(context, name, keep_memory=memory)

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
        rules = self._sandboxes.network_rules(source)
        forks = [self._fork_record(source, owner, timeout_seconds) for _ in range(count)]
        for fork in forks:
            self._sandboxes.record(fork, rules)
        try:
            started = self._snapshots.fork(
                self._sandboxes.context(source), [fork.sandbox_id for fork in forks], user=owner
            )
        except BaseException:
            for fork in forks:
                self._sandboxes.discard(fork)
            raise
        made: list[E2bSandbox | SiestaError] = []
        for fork, session in zip(forks, started.sessions, strict=True):
            if isinstance(session, SiestaError):
                self._sandboxes.discard(fork)
                made.append(session)
                continue
            try:
                made.append(self._sandboxes.started(fork))  # its timeout from its start
            except SandboxNotFound as gone:  # killed already by someone who listed it
                made.append(gone)
        log.info("e2b sandbox %s of %s forked %d times", sandbox_id, org, count)
        return made

    def _fork_record(
        self, source: E2bSandbox, owner: str, timeout_seconds: int | None
    ) -> E2bSandbox:
        return self._sandboxes.new_record(
            source.org,
            owner,
            source.template,
            timeout_seconds=timeout_seconds,
            metadata=source.metadata,
            env_vars=source.env_vars,
            auto_pause=source.on_timeout == "pause",
            auto_resume=source.auto_resume,
            public_traffic=source.public_traffic,
            mask_request_host=source.mask_request_host,
        )
