"""Bringing a session's own sandbox back: whatever stopped it (the service's idle
tiers, an engine restart, a reboot, a removed container), the next operation runs
the same sandbox again, unpaused, started or made again around its workspace.

Only a workspace that is gone ends the session: ``Restorer.restore`` says so with
``None``, and the session manager provisions a replacement.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, replace

from runtime.core import metrics, tracing
from runtime.core.context import CallContext
from runtime.core.errors import SandboxBroken, SiestaError
from runtime.core.records import SessionRecord, SessionStatus
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.providers import (
    CONVERSATION_LABEL,
    IMAGE_LABEL,
    ORG_LABEL,
    SESSION_LABEL,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
)
from runtime.seams.stores import SessionStore
from runtime.sessions.active import ActiveSession
from runtime.sessions.capacity import Quotas
from runtime.sessions.leases import Lease, lease_expired
from runtime.sessions.settings import LifecycleSettings
from runtime.sessions.timeouts import provision_timeout, resume_timeout, within_limit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Brought:
    image: CatalogImage | None = None
    """The image the sandbox was made again from (``None``: it was not made again)."""


_TIERS = {
    SandboxState.PAUSED: "paused",
    SandboxState.STOPPED: "stopped",
    SandboxState.MISSING: "stopped",
}


class Restorer:
    def __init__(
        self,
        store: SessionStore,
        provider: SandboxProvider,
        catalog: ImageCatalog,
        settings: SandboxSettings,
        quotas: Quotas,
        lifecycle: LifecycleSettings,
    ) -> None:
        self._store = store
        self._provider = provider
        self._catalog = catalog
        self._settings = settings
        self._quotas = quotas
        self._lifecycle = lifecycle

    def restore(
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
        return self.bring_back(ctx, record, lease, state)

    def bring_back(
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
            image_id=image.ref if image else record.image_id,
            image_ref=(image.digest or image.image) if image else record.image_ref,
        )
        if not self._store.put_session(active):
            raise lease_expired(lease)
        return ActiveSession(
            active, False, False, resumed=tier, sandbox_recreated=image is not None
        )

    def _start_or_recreate(
        self, ctx: CallContext, record: SessionRecord, state: SandboxState
    ) -> _Brought | None:
        """Runs the sandbox again; ``None`` when it turns out its workspace is gone."""
        sandbox_id = record.sandbox_id
        sandboxes = self._provider.lifecycle
        limit = self._lifecycle.resume_timeout_seconds
        if state is SandboxState.PAUSED:
            within_limit(sandboxes.unpause, sandbox_id, limit, resume_timeout)
            return _Brought()
        if state is SandboxState.STOPPED:
            try:
                within_limit(sandboxes.start, sandbox_id, limit, resume_timeout)
                return _Brought()
            except SandboxBroken as error:
                log.warning("%s; making it again on its workspace", error.message)
                if not sandboxes.workspace_exists(sandbox_id):
                    return None
        elif state is SandboxState.RUNNING:
            return _Brought()
        # Missing, or broken: the same sandbox again around the same workspace.
        image = replacement_image(self._catalog, ctx, record)
        labels = sandbox_labels(ctx, record.session_id, image)
        # The workspace is there already: its size is the one it was made with.
        spec = image_spec(record.session_id, image, labels, workspace_size=False)
        within_limit(
            sandboxes.recreate, spec, self._settings.provision_timeout_seconds, provision_timeout
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


def replacement_image(
    catalog: ImageCatalog, ctx: CallContext, record: SessionRecord
) -> CatalogImage:
    # The conversation keeps its image; only if operators have since
    # withdrawn it does the agent's current selection apply.
    pinned = catalog.find(record.image_id)
    if pinned is not None and pinned.enabled:
        return pinned
    return catalog.select(ctx.base_image)


def image_spec(
    session_id: str, image: CatalogImage, labels: dict[str, str], *, workspace_size: bool = True
) -> SandboxSpec:
    """What to create for a sandbox of the catalog ``image`` (``workspace_size``: give its
    workspace the image's own size, else the deployment's)."""
    return SandboxSpec(
        session_id,
        image.image,
        labels,
        image.workspace_size_mb if workspace_size else None,
        image.runtime,
        image.allow_setuid,
    )


def sandbox_labels(ctx: CallContext, session_id: str, image: CatalogImage) -> dict[str, str]:
    """What a conversation's sandbox is labelled with (reconciliation reads them back)."""
    return {
        ORG_LABEL: ctx.org,
        CONVERSATION_LABEL: ctx.conversation,
        SESSION_LABEL: session_id,
        IMAGE_LABEL: image.ref,
    }
