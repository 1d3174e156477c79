"""SessionManager: one sandbox session per conversation, provisioned lazily.

The first operation of a conversation provisions a session with the agent's
selected base image; later operations reuse it. A session keeps its image for
life. When its sandbox is gone or has failed, the next operation provisions a
replacement with a fresh workspace and reports ``workspace_reset``.

Operations on one conversation are serialised within this process by a keyed
lock. (Serialising across service instances needs the store's leases, which
come with the Redis store.)
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from runtime.config import SandboxSettings
from runtime.context import CallContext
from runtime.errors import ProvisioningTimeout, SandboxDisabled
from runtime.images import CatalogImage, ImageCatalog
from runtime.providers.base import (
    CONVERSATION_LABEL,
    IMAGE_LABEL,
    ORG_LABEL,
    SESSION_LABEL,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
)
from runtime.store.base import SessionRecord, SessionStatus, Store

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class ActiveSession:
    """A session whose sandbox is running, handed to one operation."""

    record: SessionRecord
    workspace_reset: bool
    """True when this operation had to replace a lost or failed sandbox."""
    provisioned: bool
    """True when this operation created the sandbox (first use or replacement)."""


class KeyedLocks:
    """One lock per key, dropped again when no one holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], tuple[threading.Lock, int]] = {}

    @contextlib.contextmanager
    def hold(self, key: tuple[str, str]) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


class SessionManager:
    def __init__(
        self,
        store: Store,
        provider: SandboxProvider,
        catalog: ImageCatalog,
        settings: SandboxSettings,
        clock: Clock = time.time,
    ) -> None:
        self._store = store
        self._provider = provider
        self._catalog = catalog
        self._settings = settings
        self._clock = clock
        self._locks = KeyedLocks()
        self._provisioner = concurrent.futures.ThreadPoolExecutor(
            max_workers=8, thread_name_prefix="siesta-provision"
        )

    def close(self) -> None:
        self._provisioner.shutdown(wait=False, cancel_futures=True)

    @contextlib.contextmanager
    def operation(self, ctx: CallContext) -> Iterator[ActiveSession]:
        """Hold the conversation for one operation on a running sandbox."""
        if not self._settings.enabled:
            msg = "the sandbox is not enabled in this deployment"
            raise SandboxDisabled(msg)
        with self._locks.hold(ctx.key):
            active = self._ensure_running(ctx)
            try:
                yield active
            finally:
                self._store.touch_session(
                    ctx.org, ctx.conversation, active.record.session_id, self._clock()
                )

    def describe(self, ctx: CallContext) -> SessionRecord | None:
        return self._store.get_session(ctx.org, ctx.conversation)

    def sandbox_state(self, record: SessionRecord) -> SandboxState:
        return self._provider.inspect(record.sandbox_id).state

    def delete(self, ctx: CallContext) -> SessionRecord | None:
        """Tear down the conversation's sandbox and workspace; forget the session."""
        with self._locks.hold(ctx.key):
            record = self._store.get_session(ctx.org, ctx.conversation)
            if record is not None:
                self._provider.destroy(record.sandbox_id)
                self._store.delete_session(ctx.org, ctx.conversation)
            return record

    def _ensure_running(self, ctx: CallContext) -> ActiveSession:
        record = self._store.get_session(ctx.org, ctx.conversation)
        if record is None:
            image = self._catalog.select(ctx.base_image)
            return ActiveSession(self._provision(ctx, image, generation=1), False, True)
        state = self._provider.inspect(record.sandbox_id).state
        if state is SandboxState.RUNNING:
            return ActiveSession(record, workspace_reset=False, provisioned=False)
        log.warning(
            "sandbox %s of session %s is %s; provisioning a replacement",
            record.sandbox_id,
            record.session_id,
            state.value,
        )
        self._provider.destroy(record.sandbox_id)
        image = self._replacement_image(ctx, record)
        replacement = self._provision(ctx, image, generation=record.generation + 1)
        return ActiveSession(replacement, workspace_reset=True, provisioned=True)

    def _replacement_image(self, ctx: CallContext, record: SessionRecord) -> CatalogImage:
        # The conversation keeps its image; only if operators have since
        # withdrawn it does the agent's current selection apply.
        pinned = self._catalog.find(record.image_id)
        if pinned is not None and pinned.enabled:
            return pinned
        return self._catalog.select(ctx.base_image)

    def _provision(self, ctx: CallContext, image: CatalogImage, generation: int) -> SessionRecord:
        session_id = uuid.uuid4().hex
        labels = {
            ORG_LABEL: ctx.org,
            CONVERSATION_LABEL: ctx.conversation,
            SESSION_LABEL: session_id,
            IMAGE_LABEL: image.id,
        }
        started = time.monotonic()
        sandbox_id = self._create_within_limit(SandboxSpec(session_id, image.image, labels))
        elapsed = time.monotonic() - started
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
        )
        self._store.put_session(record)
        log.info(
            "provisioned session %s (%s) for conversation %s in %.0f ms",
            session_id,
            image.id,
            ctx.conversation,
            elapsed * 1000,
        )
        return record

    def _create_within_limit(self, spec: SandboxSpec) -> str:
        limit = self._settings.provision_timeout_seconds
        future = self._provisioner.submit(self._provider.create, spec)
        try:
            return future.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            # The engine may still finish; whatever it creates is removed then.
            sandbox_id = self._provider.sandbox_id_for(spec.session_id)
            future.add_done_callback(lambda _: self._provider.destroy(sandbox_id))
            msg = f"provisioning the sandbox took longer than the limit of {limit:g} seconds"
            raise ProvisioningTimeout(msg, limit=limit, unit="seconds") from None
