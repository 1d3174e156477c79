"""The warm pool: ready sandboxes per catalog image, so that a conversation's first
operation claims one instead of creating a container.

A member is created like any sandbox (with the pool's labels instead of a
conversation's), its agent is made to answer, and it is paused: it costs memory
for its few processes and no CPU. A first operation claims the oldest member of
its image from the store (atomically, across instances), resumes it and binds
it to the conversation; a miss falls back to creating one.

Members count against the host's capacity and against two scopes of their own:
per image (``SIESTA_POOL__SIZE``) and in total (``SIESTA_POOL__MAX_TOTAL``). The
scopes are capacity slots in the store, so instances that refill at the same
time never overshoot. A conversation that needs the host's last slot evicts a
member (``evict``). Members never carry a conversation's data before a claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable

from anyio import to_thread

from runtime.core import metrics
from runtime.core.errors import SiestaError
from runtime.core.records import PoolMember
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.base import (
    IMAGE_LABEL,
    POOL_LABEL,
    SESSION_LABEL,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
)
from runtime.sessions.capacity import POOL_SLOT_PREFIX
from runtime.sessions.settings import CapacitySettings, PoolSettings
from runtime.store.base import CapacityStore, PoolStore

log = logging.getLogger(__name__)

SLOT_PREFIX = POOL_SLOT_PREFIX
"""Capacity slots of pool members are ``pool:<sandbox id>`` (conversations' have a ``/``)."""


class WarmPool:
    def __init__(
        self,
        members: PoolStore,
        slots: CapacityStore,
        provider: SandboxProvider,
        catalog: ImageCatalog,
        settings: PoolSettings,
        capacity: CapacitySettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._members = members
        self._slots = slots
        self._provider = provider
        self._catalog = catalog
        self._settings = settings
        self._capacity = capacity
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self._settings.size > 0 and self._settings.max_total > 0

    def claim(self, image: CatalogImage) -> PoolMember | None:
        """A ready member of the image, no longer in the pool (``None``: a miss)."""
        if not self.enabled:
            return None
        member = self._members.claim_pool_member(image.id)
        metrics.POOL_CLAIMS.labels("hit" if member else "miss").inc()
        if member is not None:
            self._release(member.sandbox_id, image.id)
        return member

    def evict(self, slot_member: str) -> bool:
        """Remove the member holding this capacity slot, to make room for a
        conversation; False if it was claimed or evicted meanwhile."""
        sandbox_id = slot_member.removeprefix(SLOT_PREFIX)
        found = next((m for m in self._members.pool_members() if m.sandbox_id == sandbox_id), None)
        if found is None or not self._members.remove_pool_member(sandbox_id):
            return False
        self._discard(found)
        return True

    def refill(self) -> int:
        """Create members up to the pool's size, a few per image per call (the
        refill rate); returns how many were made."""
        if not self.enabled:
            return 0
        counts: dict[str, int] = {}
        for member in self._members.pool_members():
            counts[member.image_id] = counts.get(member.image_id, 0) + 1
        made = 0
        for image in self._catalog.enabled():
            wanted = min(
                self._settings.size - counts.get(image.id, 0), self._settings.refill_per_pass
            )
            for _ in range(max(0, wanted)):
                if not self._make(image):
                    break
                made += 1
        return made

    def trim(self, dry_run: bool = False) -> list[str]:
        """Members that must go: their image is no longer enabled, or their sandbox
        is gone or was changed underneath (not paused). Returns their sandbox ids."""
        enabled = {image.id for image in self._catalog.enabled()} if self.enabled else set()
        removed = []
        members = self._members.pool_members()
        ready = {member.sandbox_id for member in members}
        for slot in self._slots.slot_members("pool"):
            sandbox_id = slot.removeprefix(SLOT_PREFIX)
            if dry_run or sandbox_id in ready:
                continue
            # A slot whose sandbox never came to be: a refill that died before it.
            if self._provider.lifecycle.inspect(sandbox_id).state is SandboxState.MISSING:
                scopes = [f"pool-image:{image.id}" for image in self._catalog.all()]
                self._slots.release_slot(slot, ["pool", *scopes, self._host_scope()])
        for member in members:
            state = self._provider.lifecycle.inspect(member.sandbox_id).state
            if member.image_id in enabled and state is SandboxState.PAUSED:
                continue
            removed.append(member.sandbox_id)
            if not dry_run and self._members.remove_pool_member(member.sandbox_id):
                self._discard(member)
        return removed

    def member_ids(self) -> set[str]:
        """Ready members and members being made (they hold a pool slot already)."""
        ready = {member.sandbox_id for member in self._members.pool_members()}
        making = {m.removeprefix(SLOT_PREFIX) for m in self._slots.slot_members("pool")}
        return ready | making

    # -- making and discarding members -----------------------------------------------

    def _make(self, image: CatalogImage) -> bool:
        session_id = uuid.uuid4().hex
        sandbox_id = self._provider.lifecycle.sandbox_id_for(session_id)
        if self._slots.claim_slot(SLOT_PREFIX + sandbox_id, self._scopes(image.id)) is not None:
            return False  # the pool, or the host, is full
        labels = {POOL_LABEL: image.id, SESSION_LABEL: session_id, IMAGE_LABEL: image.id}
        try:
            self._provider.lifecycle.create(
                SandboxSpec(session_id, image.image, labels, image.workspace_size_mb, image.runtime)
            )
            self._provider.inside.warm(sandbox_id)
            self._provider.lifecycle.pause(sandbox_id)
        except SiestaError as error:
            log.warning("could not add a %s sandbox to the pool: %s", image.id, error.message)
            with contextlib.suppress(SiestaError):
                self._provider.lifecycle.destroy(sandbox_id)
            self._release(sandbox_id, image.id)
            return False
        self._members.add_pool_member(PoolMember(image.id, sandbox_id, session_id, self._clock()))
        return True

    def _discard(self, member: PoolMember) -> None:
        with contextlib.suppress(SiestaError):
            self._provider.lifecycle.destroy(member.sandbox_id)
        self._release(member.sandbox_id, member.image_id)

    def _scopes(self, image_id: str) -> list[tuple[str, int]]:
        return [
            (f"pool-image:{image_id}", self._settings.size),
            ("pool", self._settings.max_total),
            (self._host_scope(), self._capacity.max_active_per_host),
        ]

    def _host_scope(self) -> str:
        return f"host:{self._capacity.host_id}"

    def _release(self, sandbox_id: str, image_id: str) -> None:
        scopes = [scope for scope, _ in self._scopes(image_id)]
        self._slots.release_slot(SLOT_PREFIX + sandbox_id, scopes)


async def refill_forever(pool: WarmPool, interval_seconds: float) -> None:
    """The service's refills: one every ``interval_seconds``; a failure is logged
    and counted, and the next refill runs."""
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            await to_thread.run_sync(pool.refill)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            metrics.POOL_REFILL_ERRORS.inc()
            log.warning("pool refill failed: %s", error, exc_info=error)
