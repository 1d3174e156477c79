"""SessionManager: one sandbox session per conversation, provisioned lazily.

The first operation of a conversation provisions a session with the agent's
selected base image; later operations reuse it. A session keeps its image for
life. A suspended (stopped) session is resumed by the next operation. When
its sandbox is gone or has failed, the next operation provisions a
replacement with a fresh workspace and reports ``workspace_reset``.

Every operation holds the conversation's lease (``leases.py``) for its whole
run, and every write of the session record carries the lease's fence.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from runtime.core import metrics, tracing
from runtime.core.context import CallContext
from runtime.core.errors import (
    LeaseExpired,
    SandboxBroken,
    SandboxDisabled,
    SiestaError,
)
from runtime.core.records import SessionRecord, SessionStatus
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.base import (
    CONVERSATION_LABEL,
    IMAGE_LABEL,
    ORG_LABEL,
    SESSION_LABEL,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
)
from runtime.providers.settings import SandboxSettings
from runtime.sessions.capacity import Quotas
from runtime.sessions.leases import Lease, Leases
from runtime.sessions.pool import WarmPool
from runtime.sessions.settings import LifecycleSettings
from runtime.sessions.timeouts import provision_timeout, resume_timeout, within_limit
from runtime.store.base import SessionStore

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class ResetReason(enum.StrEnum):
    """Why an operation started the conversation afresh (``workspace_reset``)."""

    WORKSPACE_MISSING = "workspace_missing"
    """The sandbox's workspace no longer exists (removed outside the service)."""
    RETIRED = "retired"
    """The session was retired (idle past ``SIESTA_LIFECYCLE__RETIRE_AFTER_SECONDS``)."""
    LOST = "lost"
    """Reconciliation found the sandbox and its workspace gone."""


@dataclass(frozen=True)
class ActiveSession:
    """A session whose sandbox is running, handed to one operation."""

    record: SessionRecord
    workspace_reset: bool
    """True when this operation had to start afresh: the workspace was gone."""
    provisioned: bool
    """True when this operation created the sandbox (first use or replacement)."""
    resumed: str | None = None
    """``"paused"`` or ``"stopped"`` when this operation brought a suspended or stopped
    sandbox back (``"stopped"``: its processes had ended)."""
    sandbox_recreated: bool = False
    """True when the sandbox could not be started and was made again around its
    workspace: files kept, anything installed outside ``/mnt/work`` gone."""
    reset_reason: ResetReason | None = None


@dataclass(frozen=True)
class _Brought:
    image: CatalogImage | None = None
    """The image the sandbox was made again from (``None``: it was not made again)."""


_TIERS = {
    SandboxState.PAUSED: "paused",
    SandboxState.STOPPED: "stopped",
    SandboxState.MISSING: "stopped",
}


class _LostLeaseHandler:
    """What to stop when the lease is lost: the command running in the sandbox."""

    def __init__(self, provider: SandboxProvider) -> None:
        self.provider = provider
        self.sandbox_id: str | None = None

    def __call__(self) -> None:
        if self.sandbox_id is not None:
            with contextlib.suppress(SiestaError):
                self.provider.inside.cancel_exec(self.sandbox_id)


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

    def close(self) -> None:
        """Nothing to release: a provider call past its limit ends on its own thread."""

    @contextlib.contextmanager
    def operation(self, ctx: CallContext) -> Iterator[ActiveSession]:
        """Hold the conversation for one operation on a running sandbox."""
        if not self._settings.enabled:
            msg = "the sandbox is not enabled in this deployment"
            raise SandboxDisabled(msg)
        on_lost = _LostLeaseHandler(self._provider)
        with self._leases.hold(ctx.key, on_lost) as lease:
            if self._admit is not None:
                self._admit(ctx)
            active = self._ensure_running(ctx, lease)
            on_lost.sandbox_id = active.record.sandbox_id
            try:
                yield active
            except SiestaError:
                if lease.lost.is_set():
                    raise _lease_expired(lease) from None
                raise
            if lease.lost.is_set() or not self._store.touch_session(
                ctx.org, ctx.conversation, active.record.session_id, self._clock(), lease.fence
            ):
                raise _lease_expired(lease)

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
            raise _lease_expired(lease)
        self._quotas.release(record)
        return record

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
        if record.status.has_sandbox:
            restored = self._restore(ctx, record, lease)
            if restored is not None:
                return restored
            reason = ResetReason.WORKSPACE_MISSING
        elif record.status is SessionStatus.LOST:
            reason = ResetReason.LOST
        else:
            reason = ResetReason.RETIRED
        image = self._replacement_image(ctx, record)
        replacement = self._provision(ctx, lease, image, record.generation + 1)
        log.warning(
            "conversation %s starts afresh (%s): session %s replaces %s",
            ctx.conversation,
            reason.value,
            replacement.session_id,
            record.session_id,
        )
        return ActiveSession(replacement, True, True, reset_reason=reason)

    def _restore(
        self, ctx: CallContext, record: SessionRecord, lease: Lease
    ) -> ActiveSession | None:
        """The session's own sandbox, running again whatever stopped it; ``None`` when its
        workspace is gone (and with it everything worth bringing back)."""
        state = self._provider.lifecycle.inspect(record.sandbox_id).state
        if state is SandboxState.RUNNING and record.status is SessionStatus.ACTIVE:
            return ActiveSession(record, workspace_reset=False, provisioned=False)
        if state is SandboxState.MISSING and not self._provider.lifecycle.workspace_exists(
            record.sandbox_id
        ):
            self._forget_sandbox(record)
            return None
        return self._bring_back(ctx, record, lease, state)

    def _bring_back(
        self, ctx: CallContext, record: SessionRecord, lease: Lease, state: SandboxState
    ) -> ActiveSession | None:
        """Unpause, start or recreate the sandbox and mark the session active: a stopped
        session counts against capacity again from here on."""
        counted = record.status is not SessionStatus.STOPPED
        if not counted:
            self._quotas.claim(record.key, record.org, record.user)
        tier = _TIERS.get(state)
        started = time.monotonic()
        try:
            with tracing.span(
                "session.resume", tier=tier or "running", session_id=record.session_id
            ):
                brought = self._start_or_recreate(ctx, record, state)
        except BaseException:
            if not counted:
                self._quotas.release(record)
            raise
        if brought is None:  # the workspace went; a replacement claims its own slot
            self._forget_sandbox(record)
            return None
        if tier is not None:
            metrics.RESUME_SECONDS.labels(tier).observe(time.monotonic() - started)
        image = brought.image
        active = replace(
            record,
            status=SessionStatus.ACTIVE,
            fence=lease.fence,
            image_id=image.id if image else record.image_id,
            image_ref=image.image if image else record.image_ref,
        )
        if not self._store.put_session(active):
            raise _lease_expired(lease)
        return ActiveSession(
            active, False, False, resumed=tier, sandbox_recreated=image is not None
        )

    def _start_or_recreate(
        self, ctx: CallContext, record: SessionRecord, state: SandboxState
    ) -> _Brought | None:
        """Runs the sandbox again; ``None`` when it turns out its workspace is gone."""
        sandbox_id = record.sandbox_id
        limit = self._lifecycle.resume_timeout_seconds
        if state is SandboxState.PAUSED:
            within_limit(self._provider.lifecycle.unpause, sandbox_id, limit, resume_timeout)
            return _Brought()
        if state is SandboxState.STOPPED:
            try:
                within_limit(self._provider.lifecycle.start, sandbox_id, limit, resume_timeout)
                return _Brought()
            except SandboxBroken as error:
                log.warning("%s; making it again on its workspace", error.message)
                if not self._provider.lifecycle.workspace_exists(sandbox_id):
                    return None
        elif state is SandboxState.RUNNING:
            return _Brought()
        # Missing, or broken: the same sandbox again around the same workspace.
        image = self._replacement_image(ctx, record)
        labels = _labels(ctx, record.session_id, image)
        spec = SandboxSpec(record.session_id, image.image, labels, None, image.runtime)
        within_limit(
            self._provider.lifecycle.recreate,
            spec,
            self._settings.provision_timeout_seconds,
            provision_timeout,
        )
        log.warning(
            "sandbox %s of session %s was made again on its workspace",
            sandbox_id,
            record.session_id,
        )
        return _Brought(image)

    def _forget_sandbox(self, record: SessionRecord) -> None:
        log.warning(
            "sandbox %s of session %s is gone with its workspace",
            record.sandbox_id,
            record.session_id,
        )
        if record.status is not SessionStatus.STOPPED:
            self._quotas.release(record)
        with contextlib.suppress(SiestaError):
            self._provider.lifecycle.destroy(record.sandbox_id)  # whatever part of it is left

    def _replacement_image(self, ctx: CallContext, record: SessionRecord) -> CatalogImage:
        # The conversation keeps its image; only if operators have since
        # withdrawn it does the agent's current selection apply.
        pinned = self._catalog.find(record.image_id)
        if pinned is not None and pinned.enabled:
            return pinned
        return self._catalog.select(ctx.base_image)

    def _provision(
        self, ctx: CallContext, lease: Lease, image: CatalogImage, generation: int
    ) -> SessionRecord:
        member = ctx.key
        self._quotas.claim(member, ctx.org, ctx.user)
        started = time.monotonic()
        try:
            with tracing.span(
                "session.provision", org=ctx.org, conversation=ctx.conversation, image=image.id
            ) as span:
                session_id, sandbox_id = self._from_pool(image) or self._create(ctx, image)
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
            image_id=image.id,
            image_ref=image.image,
            status=SessionStatus.ACTIVE,
            created_at=now,
            last_used_at=now,
            generation=generation,
            user=ctx.user,
            fence=lease.fence,
        )
        if not self._store.put_session(record):
            self._provider.lifecycle.destroy(
                sandbox_id
            )  # a newer holder owns this conversation now
            raise _lease_expired(lease)
        log.info(
            "provisioned session %s (%s) for conversation %s in %.0f ms",
            session_id,
            image.id,
            ctx.conversation,
            elapsed * 1000,
        )
        return record

    def _from_pool(self, image: CatalogImage) -> tuple[str, str] | None:
        """A warm-pool member of the image, resumed; ``None`` on a miss (or if the
        member cannot be resumed: it is discarded and a sandbox is made instead)."""
        member = self._pool.claim(image) if self._pool is not None else None
        if member is None:
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
            with contextlib.suppress(SiestaError):
                self._provider.lifecycle.destroy(member.sandbox_id)
            return None
        return member.session_id, member.sandbox_id

    def _create(self, ctx: CallContext, image: CatalogImage) -> tuple[str, str]:
        session_id = uuid.uuid4().hex
        labels = _labels(ctx, session_id, image)
        return session_id, self._create_within_limit(
            SandboxSpec(session_id, image.image, labels, image.workspace_size_mb, image.runtime)
        )

    def _create_within_limit(self, spec: SandboxSpec) -> str:
        sandbox_id = self._provider.lifecycle.sandbox_id_for(spec.session_id)
        within_limit(
            self._provider.lifecycle.create,
            spec,
            self._settings.provision_timeout_seconds,
            provision_timeout,
            cleanup=lambda: self._provider.lifecycle.destroy(sandbox_id),
        )
        return sandbox_id


def _labels(ctx: CallContext, session_id: str, image: CatalogImage) -> dict[str, str]:
    return {
        ORG_LABEL: ctx.org,
        CONVERSATION_LABEL: ctx.conversation,
        SESSION_LABEL: session_id,
        IMAGE_LABEL: image.id,
    }


def _lease_expired(lease: Lease) -> LeaseExpired:
    msg = (
        "this operation lost the conversation's lease (it could not be renewed within "
        f"the lease TTL of {lease.ttl:g} seconds); its result was discarded"
    )
    return LeaseExpired(msg, limit=lease.ttl, unit="seconds")
