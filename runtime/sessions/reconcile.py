"""Reconciliation: make what the provider has and what the store says agree.

One pass (``siesta-runtime reconcile``, a Kubernetes CronJob, or the service's
background loop):

* labelled containers and volumes that no live session owns are removed once
  older than the grace period (also what a crashed instance left mid-provisioning);
* records whose sandbox *and* workspace vanished are marked lost; a sandbox that
  stopped (or vanished, its workspace kept) without the service is noted as stopped,
  never retired: its next operation starts it again with its files;
* idle sessions are paused, stopped or retired per the lifecycle settings, except
  that a sandbox running processes of its own (a server an agent left running,
  whichever instance started it: ``busy``) is kept awake, its idle time started over;
* conversations deleted while busy are torn down; expired leases are cleared;
* approvals past their deadline expire, and executions log entries past the
  retention are removed (not in a dry run).

It never touches a session whose lease is held (it takes the lease itself) and
never anything without this deployment's label. Passes take their own lease,
so two reconcilers at once do no harm. A failure on one item is reported and
counted, and the pass goes on; only an unreachable store or engine ends a pass
early, and the background loop runs the next one regardless.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.core import metrics
from runtime.core.errors import (
    ProviderUnavailable,
    SandboxUnavailable,
    SessionBusy,
    StateUnavailable,
)
from runtime.core.records import SessionRecord, SessionStatus, conversation_key
from runtime.seams.providers import (
    CONVERSATION_LABEL,
    ORG_LABEL,
    SandboxProvider,
    SandboxState,
)
from runtime.seams.stores import DeletionStore, SessionStore
from runtime.sessions.leases import Lease, Leases
from runtime.sessions.lifecycle import Lifecycle
from runtime.sessions.pool import WarmPool
from runtime.sessions.settings import LifecycleSettings, ReconcileSettings

log = logging.getLogger(__name__)


class Sweep(Protocol):
    """Housekeeping of another layer that each pass runs as well (the executions log's:
    approvals past their deadline, entries past the retention)."""

    name: str
    """What it sweeps, as a failure names it."""

    def run(self) -> dict[str, list[str]]:
        """What it did: action name → the ids (or counts) it did it to."""
        ...


PASS_LEASE_KEY = "reconciler/pass"


@dataclass
class Report:
    dry_run: bool
    found: dict[str, int] = field(default_factory=dict)
    actions: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def act(self, action: str, subject: str) -> None:
        self.actions.setdefault(action, []).append(subject)
        if not self.dry_run:
            metrics.RECONCILE_ACTIONS.labels(action).inc()

    def as_dict(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "found": self.found,
            "actions": {
                name: {"count": len(ids), "ids": ids} for name, ids in self.actions.items()
            },
            "skippedBusy": self.skipped,
            "errors": self.errors,
        }


class Reconciler:
    def __init__(
        self,
        sessions: SessionStore,
        deletions: DeletionStore,
        provider: SandboxProvider,
        leases: Leases,
        lifecycle: Lifecycle,
        tiers: LifecycleSettings,
        settings: ReconcileSettings,
        delete_conversation: Callable[[str, Lease], None],
        clock: Callable[[], float] = time.time,
        pool: WarmPool | None = None,
        sweeps: Sequence[Sweep] = (),
        busy: Callable[[str], bool] | None = None,
    ) -> None:
        self._sessions = sessions
        self._deletions = deletions
        self._provider = provider
        self._leases = leases
        self._lifecycle = lifecycle
        self._tiers = tiers
        self._settings = settings
        self._delete_conversation = delete_conversation
        self._clock = clock
        self._pool = pool
        self._sweeps = list(sweeps)
        self._busy = busy
        """Whether a running sandbox runs processes of its own (asked of its agent)."""

    def run(self, *, dry_run: bool = False) -> Report:
        """One pass. Unreachable store or provider raise; everything else is reported."""
        report = Report(dry_run)
        try:
            with self._leases.try_hold(PASS_LEASE_KEY):
                self._pass(report)
        except SessionBusy:
            report.skipped.append("another reconciliation pass is running")
        return report

    def _pass(self, report: Report) -> None:
        if not report.dry_run:
            for sweep in self._sweeps:
                self._guarded(sweep.name, report, functools.partial(self._sweep, sweep, report))
        sandboxes = self._provider.lifecycle.list_sandboxes()
        workspaces = self._provider.lifecycle.list_workspaces()
        records = self._sessions.list_sessions()
        deleted = self._deletions.deleted_keys()
        report.found = {
            "sandboxes": len(sandboxes),
            "workspaces": len(workspaces),
            "sessions": len(records),
            "deletedWhileBusy": len(deleted),
        }
        owned = {r.sandbox_id for r in records if r.status.has_sandbox}
        if self._pool is not None:
            # Ready members, and members being made right now (they hold their slot).
            owned |= self._pool.member_ids()
            for sandbox_id in self._pool.trim(dry_run=report.dry_run):
                report.act("pool_members_trimmed", sandbox_id)
        now = self._clock()
        grace = self._settings.orphan_grace_seconds
        for sandbox in sandboxes:
            if sandbox.sandbox_id not in owned and now - sandbox.created_at >= grace:
                work = functools.partial(
                    self._remove_orphan, sandbox.sandbox_id, sandbox.labels, report
                )
                self._guarded(sandbox.sandbox_id, report, work)
        containers = {s.sandbox_id for s in sandboxes}
        for workspace in workspaces:
            if (
                workspace.name not in owned
                and workspace.name not in containers
                and now - workspace.created_at >= grace
            ):
                work = functools.partial(
                    self._remove_orphan, workspace.name, workspace.labels, report
                )
                self._guarded(workspace.name, report, work)
        for key in deleted:
            self._with_lease(key, report, functools.partial(self._delete, key, report=report))
        for record in records:
            if record.status.has_sandbox and record.key not in deleted:
                work = functools.partial(self._session, record, report=report)
                self._with_lease(record.key, report, work)
        cleared = 0 if report.dry_run else self._leases.clear_expired()
        if cleared:
            report.act("expired_leases_cleared", str(cleared))

    def _sweep(self, sweep: Sweep, report: Report) -> None:
        for action, subjects in sweep.run().items():
            for subject in subjects:
                report.act(action, subject)

    def _remove_orphan(self, name: str, labels: dict[str, str], report: Report) -> None:
        key = conversation_key(labels.get(ORG_LABEL, "?"), labels.get(CONVERSATION_LABEL, "?"))
        if self._leases.owner(key) is not None:
            return  # possibly being provisioned right now
        report.act("orphans_removed", name)
        if not report.dry_run:
            self._provider.lifecycle.destroy(name)

    def _delete(self, key: str, lease: Lease, *, report: Report) -> None:
        report.act("deleted_conversations_torn_down", key)
        if not report.dry_run:
            self._delete_conversation(key, lease)

    def _session(self, record: SessionRecord, lease: Lease, *, report: Report) -> None:
        """One session: what happened to its sandbox outside the service, then its idle
        tier. A stopped or vanished sandbox whose workspace exists is *not* lost: its
        next operation starts it (or makes it again around the workspace)."""
        fresh = self._sessions.get_session(record.org, record.conversation)
        if fresh is None or not fresh.status.has_sandbox:
            return
        sandbox_id = fresh.sandbox_id
        state = self._provider.lifecycle.inspect(sandbox_id).state
        idle = self._clock() - fresh.last_used_at
        tiers = self._tiers
        status = fresh.status
        lifecycle = self._lifecycle
        if state is SandboxState.MISSING and not self._provider.lifecycle.workspace_exists(
            sandbox_id
        ):
            self._apply("sessions_marked_lost", lifecycle.mark_lost, fresh, lease, report)
        elif idle >= tiers.retire_after_seconds:
            self._apply("idle_sessions_retired", lifecycle.retire, fresh, lease, report)
        elif state in (SandboxState.STOPPED, SandboxState.MISSING):
            if status is not SessionStatus.STOPPED:
                self._apply("stopped_sandboxes_noted", lifecycle.note_stopped, fresh, lease, report)
        elif state is SandboxState.PAUSED and status is SessionStatus.ACTIVE:
            self._apply("paused_sandboxes_noted", lifecycle.note_paused, fresh, lease, report)
        elif state is SandboxState.RUNNING and status is SessionStatus.STOPPED:
            # Started behind the service's back (say, by the engine's restart policy)
            # while off capacity: back to what the session says.
            self._apply("running_sandboxes_stopped", lifecycle.stop, fresh, lease, report)
        elif idle >= tiers.pause_after_seconds and self._runs_processes(fresh, state):
            report.act("busy_sandboxes_kept_awake", fresh.session_id)
            if not report.dry_run:
                self._sessions.touch_session(
                    fresh.org, fresh.conversation, fresh.session_id, self._clock(), fresh.fence
                )
        elif idle >= tiers.stop_after_seconds and status is not SessionStatus.STOPPED:
            self._apply("idle_sessions_stopped", lifecycle.stop, fresh, lease, report)
        elif idle >= tiers.pause_after_seconds and status is SessionStatus.ACTIVE:
            self._apply("idle_sessions_paused", lifecycle.pause, fresh, lease, report)

    def _runs_processes(self, record: SessionRecord, state: SandboxState) -> bool:
        return (
            self._busy is not None
            and state is SandboxState.RUNNING
            and record.status is SessionStatus.ACTIVE
            and self._busy(record.sandbox_id)
        )

    def _apply(
        self,
        action: str,
        transition: Callable[[SessionRecord, Lease], bool],
        record: SessionRecord,
        lease: Lease,
        report: Report,
    ) -> None:
        report.act(action, record.session_id)
        if not report.dry_run:
            transition(record, lease)

    def _with_lease(self, key: str, report: Report, work: Callable[[Lease], None]) -> None:
        def held() -> None:
            try:
                with self._leases.try_hold(key) as lease:
                    work(lease)
            except SessionBusy:
                report.skipped.append(key)

        self._guarded(key, report, held)

    def _guarded(self, subject: str, report: Report, work: Callable[[], None]) -> None:
        """One item's failure is reported and counted; the pass goes on. An
        unreachable store or engine ends the pass: every further item would fail."""
        try:
            work()
        except (StateUnavailable, ProviderUnavailable) as error:
            if isinstance(error, SandboxUnavailable):  # that one sandbox, not the engine
                self._item_failed(subject, report, error)
                return
            raise
        except Exception as error:
            self._item_failed(subject, report, error)

    def _item_failed(self, subject: str, report: Report, error: Exception) -> None:
        code = getattr(error, "code", type(error).__name__)
        message = getattr(error, "message", str(error))
        report.errors.append(f"{subject}: {code}: {message}")
        metrics.RECONCILE_ERRORS.labels("item").inc()
        log.warning("reconciling %s failed: %s: %s", subject, code, message, exc_info=error)


async def reconcile_forever(
    run_pass: Callable[[], Awaitable[Report]], interval_seconds: float
) -> None:
    """The service's background passes: one every ``interval_seconds``, whatever the
    previous one did. A pass that fails is logged and counted, never the loop's end."""
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            report = await run_pass()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            metrics.RECONCILE_ERRORS.labels("pass").inc()
            log.warning("reconciliation pass failed: %s", error, exc_info=error)
            continue
        if report.actions or report.errors:
            summary = report.as_dict()
            log.info("reconciliation: %s %s", summary["actions"], summary["errors"])
