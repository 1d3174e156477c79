"""SessionManager: one sandbox session per conversation, provisioned lazily.

The first operation of a conversation provisions a session with the agent's
selected base image; later operations reuse it. A session keeps its image for
life. A suspended (stopped) session is resumed by the next operation
(``restore.py``). When its workspace is gone, the next operation provisions a
replacement with a fresh workspace and reports ``workspace_reset``. Provider calls
that may be slow run within their limits (``timeouts.py``).

Every operation holds the conversation's lease (``leases.py``) for its whole
run, and every write of the session record carries the lease's fence.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator

from runtime.core import metrics, tracing
from runtime.core.context import CallContext
from runtime.core.errors import SandboxDisabled, SandboxUnavailable, SiestaError
from runtime.core.records import PoolMember, SessionRecord, SessionStatus
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import SandboxInside, SandboxProvider, SandboxSpec, SandboxState
from runtime.seams.stores import SessionStore
from runtime.sessions.active import ActiveSession, ResetReason
from runtime.sessions.capacity import Quotas
from runtime.sessions.gate import MakeGate
from runtime.sessions.leases import Lease, Leases, lease_expired
from runtime.sessions.pool import WarmPool
from runtime.sessions.restore import Restorer, image_spec, replacement_image, sandbox_labels
from runtime.sessions.settings import LifecycleSettings
from runtime.sessions.timeouts import provision_timeout, resume_timeout, within_limit

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class _LostLeaseHandler:
    """What to stop when the lease is lost: the command running in the sandbox."""

    def __init__(self, inside: SandboxInside) -> None:
        self.inside = inside
        self.sandbox_id: str | None = None

    def __call__(self) -> None:
        if self.sandbox_id is not None:
            with contextlib.suppress(SiestaError):
                self.inside.cancel_exec(self.sandbox_id)


class SessionManager:
    def __init__(
        self,
        store: SessionStore,
        provider: SandboxProvider,
        catalog: ImageCatalog,
        settings: SandboxSettings,
        leases: Leases,
        quotas: Quotas,
        lifecycle: LifecycleSettings,
        clock: Clock = time.time,
        pool: WarmPool | None = None,
        admit: Callable[[CallContext], None] | None = None,
        gate: MakeGate | None = None,
    ) -> None:
        """``admit`` may refuse an operation once it holds the lease, before any
        sandbox is touched (a held call whose conversation was deleted meanwhile)."""
        self._admit = admit
        self._lifecycle = lifecycle
        self._store = store
        self._provider = provider
        self._catalog = catalog
        self._settings = settings
        self._leases = leases
        self._quotas = quotas
        self._clock = clock
        self._pool = pool
        self._gate = gate
        self._restorer = Restorer(store, provider, catalog, settings, quotas, lifecycle)

    def close(self) -> None:
        """Nothing to release: a provider call past its limit ends on its own thread."""

    @contextlib.contextmanager
    def operation(self, ctx: CallContext) -> Iterator[ActiveSession]:
        """Hold the conversation for one operation on a running sandbox."""
        if not self._settings.enabled:
            msg = "the sandbox is not enabled in this deployment"
            raise SandboxDisabled(msg)
        on_lost = _LostLeaseHandler(self._provider.inside)
        with self._leases.hold(ctx.key, on_lost) as lease:
            if self._admit is not None:
                self._admit(ctx)
            active = self._ensure_running(ctx, lease)
            on_lost.sandbox_id = active.record.sandbox_id
            try:
                yield active
            except SiestaError:
                if lease.lost.is_set():
                    raise lease_expired(lease) from None
                raise
            if lease.lost.is_set() or not self._store.touch_session(
                ctx.org, ctx.conversation, active.record.session_id, self._clock(), lease.fence
            ):
                raise lease_expired(lease)

    def note_used(self, ctx: CallContext) -> bool:
        """Mark the conversation's running sandbox as used now (its idle tiers start
        over), without the lease and without resuming anything: False when it has no
        running session (paused, stopped, gone)."""
        record = self._store.get_session(ctx.org, ctx.conversation)
        if record is None or record.status is not SessionStatus.ACTIVE:
            return False
        return self._store.touch_session(
            ctx.org, ctx.conversation, record.session_id, self._clock(), record.fence
        )

    def known_running(self, ctx: CallContext) -> SessionRecord | None:
        """The conversation's session when it is active and the provider knows its
        sandbox runs, read without the lease: for work beside the conversation's
        operations (a connection to a port) that must not wait for a long command.
        ``None`` means "take the lease" (``operation`` resumes or restarts it)."""
        record = self._store.get_session(ctx.org, ctx.conversation)
        if record is None or record.status is not SessionStatus.ACTIVE:
            return None
        return record if self._provider.lifecycle.known_running(record.sandbox_id) else None

    def describe(self, ctx: CallContext) -> SessionRecord | None:
        return self._store.get_session(ctx.org, ctx.conversation)

    def sandbox_state(self, record: SessionRecord) -> SandboxState:
        return self._provider.lifecycle.inspect(record.sandbox_id).state

    def teardown(self, org: str, conversation: str, lease: Lease) -> SessionRecord | None:
        """Remove the conversation's sandbox and workspace and forget the session.

        The caller holds the conversation's lease.
        """
        record = self._store.get_session(org, conversation)
        if record is None:
            return None
        self._provider.lifecycle.destroy(record.sandbox_id)
        if self._store.delete_session(org, conversation, lease.fence) is None:
            raise lease_expired(lease)
        self._quotas.release(record)
        return record

    def provision_with(
        self, ctx: CallContext, image: CatalogImage, make: Callable[[SandboxSpec], str]
    ) -> SessionRecord | None:
        """The first session of a conversation that has none, its sandbox made by
        ``make`` (from a snapshot, say) out of the spec a new session of ``image`` gets:
        its own lease, capacity, labels. ``None`` when the conversation has a session."""
        with self._leases.hold(ctx.key) as lease:
            if self._store.get_session(ctx.org, ctx.conversation) is not None:
                return None
            return self._provision(ctx, lease, image, 1, make)

    def _ensure_running(self, ctx: CallContext, lease: Lease) -> ActiveSession:
        record = self._store.get_session(ctx.org, ctx.conversation)
        if record is None:
            image = self._catalog.select(ctx.base_image)
            return ActiveSession(self._provision(ctx, lease, image, 1), False, True)
        # The provider knows, without asking its engine, that the sandbox runs (an open
        # channel, and nothing has happened to the container since the engine said so).
        if record.status is SessionStatus.ACTIVE and self._provider.lifecycle.known_running(
            record.sandbox_id
        ):
            return ActiveSession(record, workspace_reset=False, provisioned=False)
        if record.status is SessionStatus.PAUSED:
            # Paused by the idle tier, so most likely still paused: thaw it without
            # asking the engine first; if it is not paused any more, ask below.
            with contextlib.suppress(SandboxUnavailable):
                thawed = self._restorer.bring_back(ctx, record, lease, SandboxState.PAUSED)
                if thawed is not None:
                    return thawed
        if record.status.has_sandbox:
            restored = self._restorer.restore(ctx, record, lease)
            if restored is not None:
                return restored
            reason = ResetReason.WORKSPACE_MISSING
        elif record.status is SessionStatus.LOST:
            reason = ResetReason.LOST
        else:
            reason = ResetReason.RETIRED
        image = replacement_image(self._catalog, ctx, record)
        replacement = self._provision(ctx, lease, image, record.generation + 1)
        log.warning(
            "conversation %s starts afresh (%s): session %s replaces %s",
            ctx.conversation,
            reason.value,
            replacement.session_id,
            record.session_id,
        )
        return ActiveSession(replacement, True, True, reset_reason=reason)

    def _provision(
        self,
        ctx: CallContext,
        lease: Lease,
        image: CatalogImage,
        generation: int,
        make: Callable[[SandboxSpec], str] | None = None,
    ) -> SessionRecord:
        member = ctx.key
        self._quotas.claim(member, ctx.org, ctx.user)
        started = time.monotonic()
        try:
            with tracing.span(
                "session.provision", org=ctx.org, conversation=ctx.conversation, image=image.id
            ) as span:
                if make is None:
                    session_id, sandbox_id = self._obtain(ctx, image)
                else:
                    with self._gate.turn() if self._gate is not None else contextlib.nullcontext():
                        session_id, sandbox_id = self._create(ctx, image, make)
                span.set_attribute("siesta.session_id", session_id)
        except BaseException:
            self._quotas.release_member(member, ctx.org, ctx.user)
            raise
        elapsed = time.monotonic() - started
        metrics.PROVISION_SECONDS.observe(elapsed)
        now = self._clock()
        record = SessionRecord(
            org=ctx.org,
            conversation=ctx.conversation,
            session_id=session_id,
            sandbox_id=sandbox_id,
            image_id=image.ref,
            image_ref=image.digest or image.image,
            status=SessionStatus.ACTIVE,
            created_at=now,
            last_used_at=now,
            generation=generation,
            user=ctx.user,
            fence=lease.fence,
        )
        if not self._store.put_session(record):
            # A newer holder owns this conversation now.
            self._provider.lifecycle.destroy(sandbox_id)
            raise lease_expired(lease)
        log.info(
            "provisioned session %s (%s) for conversation %s in %.0f ms",
            session_id,
            image.id,
            ctx.conversation,
            elapsed * 1000,
        )
        return record

    def _obtain(self, ctx: CallContext, image: CatalogImage) -> tuple[str, str]:
        """A sandbox for a new session: a ready pool member, or one made in this
        operation's turn (a member that became ready meanwhile is taken instead)."""
        pool = self._pool
        found = self._from_pool(pool.claim(image)) if pool is not None else None
        if found is not None:
            return found
        with self._gate.turn() if self._gate is not None else contextlib.nullcontext():
            found = self._from_pool(pool.take(image)) if pool is not None else None
            return found or self._create(ctx, image)

    def _from_pool(self, member: PoolMember | None) -> tuple[str, str] | None:
        """The claimed member, resumed; ``None`` on a miss (or if the member cannot be
        resumed: it is discarded and a sandbox is made instead)."""
        if member is None or self._pool is None:
            return None
        try:
            within_limit(
                self._provider.lifecycle.unpause,
                member.sandbox_id,
                self._lifecycle.resume_timeout_seconds,
                resume_timeout,
            )
        except SiestaError as error:
            log.warning("pool member %s could not be resumed: %s", member.sandbox_id, error)
            self._pool.resume_failed(member)
            return None
        return member.session_id, member.sandbox_id

    def _create(
        self,
        ctx: CallContext,
        image: CatalogImage,
        make: Callable[[SandboxSpec], str] | None = None,
    ) -> tuple[str, str]:
        session_id = uuid.uuid4().hex
        labels = sandbox_labels(ctx, session_id, image)
        spec = image_spec(session_id, image, labels)
        return session_id, self._create_within_limit(spec, make)

    def _create_within_limit(
        self, spec: SandboxSpec, make: Callable[[SandboxSpec], str] | None = None
    ) -> str:
        sandbox_id = self._provider.lifecycle.sandbox_id_for(spec.session_id)
        within_limit(
            make or self._provider.lifecycle.create,
            spec,
            self._settings.provision_timeout_seconds,
            provision_timeout,
            cleanup=lambda: self._provider.lifecycle.destroy(sandbox_id),
        )
        return sandbox_id
