"""Pausing and resuming a conversation's sandbox on request, on the idle tiers.

A pause is the idle tiers' ``paused`` (processes frozen, memory kept), or with
``keep_memory=False`` their ``stopped`` (processes ended, memory freed, disk and
installed packages kept). It holds the conversation's lease like any operation, so
it waits for the call in flight to end and never cuts one short. What follows is the
idle tiers' business: a paused sandbox left alone is stopped after
``SIESTA_LIFECYCLE__STOP_AFTER_SECONDS`` and retired after ``..._RETIRE_AFTER_SECONDS``
(counted from its last operation). A resume is an operation that does nothing: the
conversation's next call would have resumed it anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.context import CallContext
from runtime.core.records import SessionRecord, SessionStatus
from runtime.sandbox.metrics import NoSandbox
from runtime.seams.providers import SandboxLifecycle, SandboxState
from runtime.sessions.leases import Lease, Leases, lease_expired
from runtime.sessions.lifecycle import Lifecycle
from runtime.sessions.manager import SessionManager


@dataclass(frozen=True)
class TierChange:
    state: SandboxState
    """Where the sandbox is now: ``paused``, ``stopped`` or ``running``."""
    changed: bool
    """Whether this call moved it (False: it was there already)."""
    resumed: str | None = None
    """A resume: ``"paused"`` or ``"stopped"``, what it was brought back from."""


class SandboxTiers:
    def __init__(
        self,
        sessions: SessionManager,
        leases: Leases,
        lifecycle: Lifecycle,
        provider: SandboxLifecycle,
    ) -> None:
        self._sessions = sessions
        self._leases = leases
        self._lifecycle = lifecycle
        self._provider = provider

    def pause(self, ctx: CallContext, *, keep_memory: bool = True) -> TierChange:
        """Pause (or, without its memory, stop) the conversation's sandbox now."""
        with self._leases.hold(ctx.key) as lease:
            record = self._record(ctx)
            state = self._provider.inspect(record.sandbox_id).state
            if state is SandboxState.RUNNING or (state is SandboxState.PAUSED and not keep_memory):
                transition = self._lifecycle.pause if keep_memory else self._lifecycle.stop
                self._check(transition(record, lease), lease)
                return TierChange(
                    SandboxState.PAUSED if keep_memory else SandboxState.STOPPED, True
                )
            # Already there (or deeper: a stopped sandbox is not woken to be paused);
            # the record is brought in line with what the engine says, as reconciliation would.
            if state is SandboxState.PAUSED:
                self._note(record, SessionStatus.PAUSED, lease)
                return TierChange(SandboxState.PAUSED, False)
            self._note(record, SessionStatus.STOPPED, lease)
            return TierChange(SandboxState.STOPPED, False)

    def resume(self, ctx: CallContext) -> TierChange:
        """Bring the conversation's sandbox back to running (as its next call would)."""
        self._record(ctx)  # a conversation without a sandbox is not given one here
        with self._sessions.operation(ctx) as active:
            return TierChange(SandboxState.RUNNING, active.resumed is not None, active.resumed)

    def _record(self, ctx: CallContext) -> SessionRecord:
        record = self._sessions.describe(ctx)
        if record is None or not record.status.has_sandbox:
            msg = f"conversation {ctx.conversation!r} has no sandbox"
            raise NoSandbox(msg, conversation=ctx.conversation)
        return record

    def _note(self, record: SessionRecord, status: SessionStatus, lease: Lease) -> None:
        if record.status is status:
            return
        note = (
            self._lifecycle.note_paused
            if status is SessionStatus.PAUSED
            else self._lifecycle.note_stopped
        )
        self._check(note(record, lease), lease)

    @staticmethod
    def _check(written: bool, lease: Lease) -> None:
        if not written:
            raise lease_expired(lease)
