"""The warm pool: ready sandboxes per catalog image, as many as demand asks, so that a
conversation's first operation claims one instead of making a container.

A member is created like any sandbox (with the pool's labels instead of a
conversation's), its agent is made to answer, and it is paused: it costs memory
for its few processes and no CPU. A first operation claims the oldest member of
its image from the store (atomically, across instances), resumes it and binds it
to the conversation; a miss makes one, in its turn (``gate.py``).

How many: every first operation is an arrival, noted in the store; each image's
target follows its recent arrivals (``demand.py``), between a floor and a ceiling,
and all images within a total. Refills run in parallel, in the turns the gate
gives them: always up to a low-water mark, above it only while no conversation
waits for a sandbox (``refill_step``). When demand falls, the surplus is removed.

Members count against the host's capacity and against two scopes of their own: per
image (``SIESTA_POOL__MAX_PER_IMAGE``) and in total (``SIESTA_POOL__MAX_TOTAL``).
The scopes are capacity slots in the store, so instances that refill at the same
time never overshoot a ceiling. A conversation that needs the host's last slot
evicts a member (``evict``). Members never carry a conversation's data before a
claim.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from runtime.core import metrics
from runtime.core.errors import SiestaError
from runtime.core.records import PoolMember
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.seams.providers import (
    IMAGE_LABEL,
    POOL_LABEL,
    SESSION_LABEL,
    SandboxProvider,
    SandboxState,
)
from runtime.seams.stores import CapacityStore, PoolStore
from runtime.sessions import demand
from runtime.sessions.capacity import POOL_SLOT_PREFIX
from runtime.sessions.gate import MakeGate
from runtime.sessions.restore import image_spec
from runtime.sessions.settings import CapacitySettings, PoolSettings

log = logging.getLogger(__name__)

SLOT_PREFIX = POOL_SLOT_PREFIX
"""Capacity slots of pool members are ``pool:<sandbox id>`` (conversations' have a ``/``)."""

Launch = Callable[[Callable[[], None]], None]
"""Runs a member's making elsewhere (a refiller thread) and returns at once."""


class WarmPool:
    def __init__(
        self,
        members: PoolStore,
        slots: CapacityStore,
        provider: SandboxProvider,
        catalog: ImageCatalog,
        settings: PoolSettings,
        capacity: CapacitySettings,
        gate: MakeGate,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._members = members
        self._slots = slots
        self._provider = provider
        self._catalog = catalog
        self._settings = settings
        self._capacity = capacity
        self._gate = gate
        self._clock = clock
        self._making: set[str] = set()
        """Sandboxes this instance is making as members (their slots are taken)."""
        self.arrived = threading.Event()
        """Set by every arrival: the refiller looks at once instead of at its interval."""

    @property
    def enabled(self) -> bool:
        return self._settings.active

    def claim(self, image: CatalogImage) -> PoolMember | None:
        """A ready member of the image, no longer in the pool (``None``: a miss). Every
        call is an arrival: the pool's size follows them."""
        if not self.enabled:
            return None
        now = self._clock()
        self._members.note_pool_arrival(
            image.key, now, forget_before=now - self._settings.demand_window_seconds
        )
        self.arrived.set()
        member = self.take(image)
        metrics.POOL_CLAIMS.labels("hit" if member else "miss").inc()
        if member is None:
            metrics.POOL_MISSES.labels(image.ref, "empty").inc()
        return member

    def take(self, image: CatalogImage) -> PoolMember | None:
        """A ready member, if there is one now (a caller that missed takes one that
        became ready while it waited for its turn to make its own)."""
        if not self.enabled:
            return None
        member = self._members.claim_pool_member(image.key)
        if member is not None:
            self._release(member.sandbox_id, image.key)
        return member

    def resume_failed(self, member: PoolMember) -> None:
        """The claimed member could not be resumed: it is discarded (the caller makes
        a sandbox instead)."""
        metrics.POOL_MISSES.labels(_version(member.image_id), "resume_failed").inc()
        with contextlib.suppress(SiestaError):
            self._provider.lifecycle.destroy(member.sandbox_id)

    def evict(self, slot_member: str) -> bool:
        """Remove the member holding this capacity slot, to make room for a
        conversation; False if it was claimed or evicted meanwhile."""
        sandbox_id = slot_member.removeprefix(SLOT_PREFIX)
        found = next((m for m in self._members.pool_members() if m.sandbox_id == sandbox_id), None)
        if found is None or not self._members.remove_pool_member(sandbox_id):
            return False
        self._discard(found)
        return True

    def targets(self) -> dict[str, int]:
        """Ready members each enabled image should have now."""
        if not self.enabled:
            return {}
        since = self._clock() - self._settings.demand_window_seconds
        wanted = {
            image.key: demand.target(self._members.pool_arrivals(image.key, since), self._settings)
            for image in self._catalog.enabled()
        }
        targets = demand.share_out(wanted, self._settings.max_total)
        for key, target in targets.items():
            metrics.POOL_TARGET.labels(_version(key)).set(target)
        return targets

    def refill_step(self, launch: Launch, *, in_gaps: bool = True) -> int:
        """Start making the members each image lacks, as many as the gate gives turns
        for; remove the surplus of images whose demand fell. Returns how many were
        started. ``in_gaps``: above the low-water mark, start nothing while first
        operations are being served."""
        targets = self.targets()
        ready: dict[str, list[PoolMember]] = {}
        for member in self._members.pool_members():
            ready.setdefault(member.image_id, []).append(member)
        started = 0
        for image in self._catalog.enabled():
            target = targets.get(image.key, 0)
            held = len(self._slots.slot_members(f"pool-image:{image.key}"))  # ready + making
            if held > target:
                self._shrink(ready.get(image.key, []), held - target)
                continue
            low_water = max(self._gate.concurrency, math.ceil(target / 10))
            for coming in range(target - held):
                if in_gaps and held + coming >= low_water and not self._in_a_gap():
                    break  # plenty ready: leave the engine to the conversations waiting
                if not self._gate.try_idle_turn():
                    return started
                reserved = self._reserve(image)
                if reserved is None:
                    self._gate.release()
                    break
                launch(self._in_turn(image, *reserved))
                started += 1
        return started

    def _in_a_gap(self) -> bool:
        """No first operation is being served, nor was for the quiet time."""
        quiet = self._gate.quiet_for()
        return quiet > 0 and quiet >= self._settings.refill_quiet_seconds

    def refill(self) -> int:
        """Make the members every image lacks, here and now (one at a time)."""
        made = 0

        def run_now(make: Callable[[], None]) -> None:
            nonlocal made
            make()
            made += 1

        while self.refill_step(run_now, in_gaps=False):
            pass
        return made

    def trim(self, dry_run: bool = False) -> list[str]:
        """Members that must go: their image is no longer enabled, or their sandbox
        is gone or was changed underneath (not paused). Returns their sandbox ids."""
        enabled = self._enabled_keys() if self.enabled else set()
        removed = []
        members = self._members.pool_members()
        ready = {member.sandbox_id for member in members}
        for slot in self._slots.slot_members("pool"):
            sandbox_id = slot.removeprefix(SLOT_PREFIX)
            if dry_run or sandbox_id in ready or sandbox_id in self._making:
                continue
            # A slot whose sandbox never came to be: a refill that died before it.
            if self._provider.lifecycle.inspect(sandbox_id).state is SandboxState.MISSING:
                scopes = [f"pool-image:{image.key}" for image in self._catalog.all()]
                self._slots.release_slot(slot, ["pool", *scopes, self._host_scope()])
        for member in members:
            state = self._provider.lifecycle.inspect(member.sandbox_id).state
            if member.image_id in enabled and state is SandboxState.PAUSED:
                continue
            removed.append(member.sandbox_id)
            if not dry_run and self._members.remove_pool_member(member.sandbox_id):
                metrics.POOL_DISCARDED.labels(_version(member.image_id), "trimmed").inc()
                self._discard(member)
        return removed

    def member_ids(self) -> set[str]:
        """Ready members and members being made (they hold a pool slot already)."""
        ready = {member.sandbox_id for member in self._members.pool_members()}
        making = {m.removeprefix(SLOT_PREFIX) for m in self._slots.slot_members("pool")}
        return ready | making

    def _enabled_keys(self) -> set[str]:
        """The builds a member may be of: the current build of every enabled version."""
        return {image.key for image in self._catalog.enabled()}

    # -- making and discarding members -----------------------------------------------

    def _reserve(self, image: CatalogImage) -> tuple[str, str] | None:
        """A pool slot for a new member of the image: (session id, sandbox id), or
        ``None`` when a ceiling (the image's, the pool's, the host's) is reached."""
        session_id = uuid.uuid4().hex
        sandbox_id = self._provider.lifecycle.sandbox_id_for(session_id)
        self._making.add(sandbox_id)  # before its slot: a trim never takes it for lost
        if self._slots.claim_slot(SLOT_PREFIX + sandbox_id, self._scopes(image.key)) is not None:
            self._making.discard(sandbox_id)
            return None
        return session_id, sandbox_id

    def _in_turn(self, image: CatalogImage, session_id: str, sandbox_id: str) -> Callable[[], None]:
        def make() -> None:
            metrics.POOL_MAKING.labels(image.ref).inc()
            try:
                self._make(image, session_id, sandbox_id)
            finally:
                self._making.discard(sandbox_id)
                metrics.POOL_MAKING.labels(image.ref).dec()
                self._gate.release()

        return make

    def _make(self, image: CatalogImage, session_id: str, sandbox_id: str) -> None:
        labels = {POOL_LABEL: image.key, SESSION_LABEL: session_id, IMAGE_LABEL: image.ref}
        try:
            self._provider.lifecycle.create(image_spec(session_id, image, labels))
            self._provider.inside.warm(sandbox_id)
            self._provider.lifecycle.pause(sandbox_id)
        except SiestaError as error:
            log.warning("could not add a %s sandbox to the pool: %s", image.key, error.message)
            metrics.POOL_DISCARDED.labels(image.ref, "failed").inc()
            with contextlib.suppress(SiestaError):
                self._provider.lifecycle.destroy(sandbox_id)
            self._release(sandbox_id, image.key)
            return
        member = PoolMember(image.key, sandbox_id, session_id, self._clock())
        if image.key not in self._enabled_keys():
            # Withdrawn or rebuilt while it was being made: a trim that ran meanwhile
            # could not see it, so it must not become a member now.
            metrics.POOL_DISCARDED.labels(image.ref, "trimmed").inc()
            self._discard(member)
            return
        self._members.add_pool_member(member)
        metrics.POOL_MADE.labels(image.ref).inc()

    def _shrink(self, ready: list[PoolMember], surplus: int) -> None:
        """Demand fell: remove up to ``surplus`` ready members, the newest first (the
        oldest are claimed first, so this keeps the claim order)."""
        for member in reversed(ready[-surplus:]):
            if self._members.remove_pool_member(member.sandbox_id):
                metrics.POOL_DISCARDED.labels(_version(member.image_id), "surplus").inc()
                self._discard(member)

    def _discard(self, member: PoolMember) -> None:
        with contextlib.suppress(SiestaError):
            self._provider.lifecycle.destroy(member.sandbox_id)
        self._release(member.sandbox_id, member.image_id)

    def _scopes(self, image_id: str) -> list[tuple[str, int]]:
        return [
            (f"pool-image:{image_id}", self._settings.max_per_image),
            ("pool", self._settings.max_total),
            (self._host_scope(), self._capacity.max_active_per_host),
        ]

    def _host_scope(self) -> str:
        return f"host:{self._capacity.host_id}"

    def _release(self, sandbox_id: str, image_id: str) -> None:
        scopes = [scope for scope, _ in self._scopes(image_id)]
        self._slots.release_slot(SLOT_PREFIX + sandbox_id, scopes)


def _version(key: str) -> str:
    """A member's ``id:tag`` from its key (``CatalogImage.key``): metrics name versions,
    not builds, so a rebuild does not start a new series."""
    return key.partition("@")[0]


class PoolRefiller:
    """The service's refills, on threads of their own: a step at every interval, and
    at once after an arrival; the members' making runs on up to the gate's
    concurrency of threads. A failed step is logged and counted; the next one runs."""

    def __init__(self, pool: WarmPool, concurrency: int, interval_seconds: float) -> None:
        self._pool = pool
        self._interval = interval_seconds
        self._makers = ThreadPoolExecutor(concurrency, thread_name_prefix="pool-make")
        self._stopping = threading.Event()
        self._loop = threading.Thread(target=self._run, name="pool-refill", daemon=True)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._stopping.set()
        self._pool.arrived.set()
        self._loop.join(timeout=10)
        # Members being made finish (their slots and containers stay consistent).
        self._makers.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._pool.refill_step(self._launch)
            except Exception as error:
                metrics.POOL_REFILL_ERRORS.inc()
                log.warning("pool refill failed: %s", error, exc_info=error)
            self._pool.arrived.wait(self._interval)
            self._pool.arrived.clear()

    def _launch(self, make: Callable[[], None]) -> None:
        self._makers.submit(self._logged, make)

    @staticmethod
    def _logged(make: Callable[[], None]) -> None:
        try:
            make()
        except Exception as error:
            metrics.POOL_REFILL_ERRORS.inc()
            log.warning("making a pool member failed: %s", error, exc_info=error)
