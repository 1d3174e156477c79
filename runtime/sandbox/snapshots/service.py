"""Snapshots of a conversation's sandbox, and new conversations started from them.

A snapshot keeps the sandbox's files: its workspace and what was installed outside
it (the provider's ``snapshot``: Docker clones the workspace's and the writable
layer's disks, by reference where the disk folder can). Running processes and memory
are not kept: a call that asks for them (``keep_memory``) is refused with
``snapshot_memory_not_supported`` and the provider's reason. It is taken under the
source conversation's lease, so no command of that conversation runs meanwhile; the
source keeps running and keeps its files.

A conversation started from a snapshot is a new session like any first one (its own
lease, capacity slot, labels, egress credentials), whose sandbox starts from the
snapshot's image and clones of its disks, its own: what either side changes later
the other never sees. A fork is both in one call; its snapshot is never recorded,
and its workspace copy becomes the fork's own (one copy, not two; of several forks,
the last one's). A fork also starts with the source's network rules, so it can reach
no more than the source could (unless rules of its own were set before it was made);
a conversation started from a snapshot does not: a snapshot is a template, kept by
the org beyond its source, and gets the rules set for the new conversation, as E2B's
templates leave network options to each ``Sandbox.create``.

Deleting a snapshot never breaks a sandbox made from it: each has its own copy of
the workspace, and the engine keeps an image while containers use it.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import string
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from runtime.core.context import CallContext
from runtime.core.errors import InvalidRequest, SiestaError, SnapshotMemoryNotSupported
from runtime.core.network_rules import NetworkRules
from runtime.core.records import SessionRecord, SnapshotRecord
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.sandbox.snapshots.errors import (
    ConversationExists,
    NoSandboxToSnapshot,
    SnapshotLimitReached,
    SnapshotNotFound,
)
from runtime.sandbox.snapshots.settings import SnapshotSettings
from runtime.seams.providers import SandboxProvider, SandboxSpec, SnapshotArtifacts
from runtime.seams.stores import NetworkRuleStore, SnapshotStore
from runtime.sessions.manager import SessionManager

log = logging.getLogger(__name__)

ID_PREFIX = "snap"
_ALPHABET = string.ascii_lowercase + string.digits
"""E2B's SDKs put a snapshot id in paths as a template id: ``[a-z0-9]``."""


def new_snapshot_id() -> str:
    return ID_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(16))


@dataclass(frozen=True)
class Fork:
    sessions: list[SessionRecord | SiestaError]
    """One per conversation asked for: its new session, or why it could not start."""
    snapshot_seconds: float
    start_seconds: float


class Snapshots:
    def __init__(
        self,
        store: SnapshotStore,
        sessions: SessionManager,
        provider: SandboxProvider,
        catalog: ImageCatalog,
        settings: SnapshotSettings,
        clock: Callable[[], float] = time.time,
        *,
        network_rules: NetworkRuleStore,
    ) -> None:
        """``network_rules``: each conversation's own; a fork starts with its source's."""
        self._store = store
        self._network_rules = network_rules
        self._sessions = sessions
        self._provider = provider
        self._catalog = catalog
        self._settings = settings
        self._clock = clock

    def take(
        self,
        ctx: CallContext,
        name: str | None = None,
        metadata: dict[str, str] | None = None,
        *,
        keep_memory: bool = False,
    ) -> SnapshotRecord:
        """A snapshot of the conversation's sandbox (resumed first if it was suspended);
        ``keep_memory``: with its processes and memory, where the provider can."""
        self._refuse_memory(keep_memory)
        limit = self._settings.max_per_org
        if len(self._store.list_snapshots(ctx.org)) >= limit:
            raise _limit_reached(limit)
        snapshot_id = new_snapshot_id()
        artifacts, source = self._snapshot(ctx, snapshot_id)
        record = SnapshotRecord(
            org=ctx.org,
            snapshot_id=snapshot_id,
            owner=ctx.user,
            conversation=ctx.conversation,
            session_id=source.session_id,
            image_id=source.image_id,
            image=artifacts.image,
            workspace=artifacts.workspace,
            workspace_bytes=artifacts.workspace_bytes,
            workspace_allocated_bytes=artifacts.workspace_allocated_bytes,
            image_bytes=artifacts.image_bytes,
            created_at=self._clock(),
            name=name,
            metadata=dict(metadata or {}),
            layer=artifacts.layer,
            copy_on_write=artifacts.copy_on_write,
        )
        if not self._store.add_snapshot(record, limit):  # others took the last ones meanwhile
            self._provider.lifecycle.delete_snapshot(snapshot_id)
            raise _limit_reached(limit)
        log.info("snapshot %s of %s taken", snapshot_id, ctx.key)
        return record

    def get(self, org: str, snapshot_id: str) -> SnapshotRecord:
        record = self._store.get_snapshot(org, snapshot_id)
        if record is None:
            msg = f"snapshot {snapshot_id!r} not found"
            raise SnapshotNotFound(msg, snapshotId=snapshot_id)
        return record

    def list(self, org: str, conversation: str | None = None) -> list[SnapshotRecord]:
        found = self._store.list_snapshots(org)
        return [s for s in found if conversation is None or s.conversation == conversation]

    def delete(self, org: str, snapshot_id: str) -> SnapshotRecord:
        """The record first (nothing new starts from it), then its image and copy."""
        record = self._store.delete_snapshot(org, snapshot_id)
        if record is None:
            msg = f"snapshot {snapshot_id!r} not found"
            raise SnapshotNotFound(msg, snapshotId=snapshot_id)
        self._provider.lifecycle.delete_snapshot(snapshot_id)
        log.info("snapshot %s of %s deleted", snapshot_id, org)
        return record

    def start(self, ctx: CallContext, snapshot_id: str) -> SessionRecord:
        """A new conversation ``ctx.conversation`` whose sandbox starts from the snapshot;
        ``ConversationExists`` when that conversation has a sandbox already."""
        record = self.get(ctx.org, snapshot_id)
        self._refuse_existing(ctx)
        return self._start(ctx, record.image_id, _artifacts(record), consume=False)

    def fork(
        self,
        source: CallContext,
        conversations: Sequence[str],
        *,
        user: str | None = None,
        keep_memory: bool = False,
    ) -> Fork:
        """New conversations, one per id, starting from the source's sandbox as it is
        now, with its network rules (in the caller's org, as ``user``, else the
        source's): one snapshot, never recorded. Each start succeeds or fails on its own
        (``Fork.sessions``)."""
        self._refuse_memory(keep_memory)
        limit = self._settings.max_forks_per_call
        if not 1 <= len(conversations) <= limit:
            msg = (
                f"a fork makes 1 to {limit} conversations at once "
                f"(SIESTA_SNAPSHOTS__MAX_FORKS_PER_CALL), not {len(conversations)}"
            )
            raise InvalidRequest(msg, limit=limit, unit="forks")
        if len(set(conversations)) != len(conversations):
            msg = "each fork needs a conversation id of its own: an id is repeated"
            raise InvalidRequest(msg)
        targets = [
            replace(source, conversation=c, user=user or source.user, retry=None)
            for c in conversations
        ]
        for target in targets:
            if target.conversation == source.conversation:
                msg = "a fork needs a new conversation id, not the source's"
                raise ConversationExists(msg, conversationId=target.conversation)
        if len(targets) == 1:
            self._refuse_existing(targets[0])  # before the copy: a clear answer, no waste
        rules = self._network_rules.network_rules(source.org, source.conversation)
        started = time.monotonic()
        snapshot_id = new_snapshot_id()
        artifacts, record = self._snapshot(source, snapshot_id)
        taken = time.monotonic()

        def start(target: CallContext, consume: bool) -> SessionRecord | SiestaError:
            try:
                return self._start(target, record.image_id, artifacts, consume=consume, rules=rules)
            except SiestaError as error:
                return error

        try:
            if artifacts.copy_on_write:
                # Clones cost no copy: every fork clones and they start side by side (the
                # provisioning turns still bound how many the engine makes at once).
                # Each start runs in a copy of this call's context (its request id, trace).
                contexts = [contextvars.copy_context() for _ in targets]
                with ThreadPoolExecutor(len(targets), thread_name_prefix="fork") as starting:
                    running = [
                        starting.submit(context.run, start, target, False)
                        for context, target in zip(contexts, targets, strict=True)
                    ]
                    sessions = [one.result() for one in running]
            else:
                # Copies: one after another (side by side they would fight for the disk),
                # the last fork taking the copy as its own disk, the others copying it.
                last = len(targets) - 1
                sessions = [start(t, index == last) for index, t in enumerate(targets)]
        finally:
            # The copy is the forks' now; the image stays while their containers use it.
            self._provider.lifecycle.delete_snapshot(snapshot_id)
        log.info("conversation %s forked to %s", source.key, ", ".join(conversations))
        return Fork(sessions, taken - started, time.monotonic() - taken)

    def _snapshot(
        self, ctx: CallContext, snapshot_id: str
    ) -> tuple[SnapshotArtifacts, SessionRecord]:
        record = self._sessions.describe(ctx)
        if record is None or not record.status.has_sandbox:  # none, or retired: no files
            msg = f"conversation {ctx.conversation!r} has no sandbox to snapshot"
            raise NoSandboxToSnapshot(msg)
        with self._sessions.operation(ctx) as active:
            sandbox_id = active.record.sandbox_id
            return self._provider.lifecycle.snapshot(sandbox_id, snapshot_id), active.record

    def _start(
        self,
        ctx: CallContext,
        image_id: str,
        artifacts: SnapshotArtifacts,
        *,
        consume: bool,
        rules: NetworkRules | None = None,
    ) -> SessionRecord:
        """``rules``: the new conversation's network rules, unless it has its own."""
        image = self._image(ctx, image_id)
        inherited = False

        def make(spec: SandboxSpec) -> str:
            nonlocal inherited
            # Here, under the new conversation's lease and only once it is known to have
            # no session: a fork that finds the conversation taken changes nothing of it.
            # Stored before the sandbox exists, so its first connection obeys them.
            own = self._network_rules.network_rules(ctx.org, ctx.conversation)
            if rules is not None and own is None:
                self._network_rules.set_network_rules(ctx.org, ctx.conversation, rules)
                inherited = True
            return self._provider.lifecycle.create_from_snapshot(spec, artifacts, consume=consume)

        try:
            session = self._sessions.provision_with(ctx, image, make)
        except BaseException:
            if inherited:  # no sandbox came of it: the id is free again, as it was
                self._network_rules.forget_network(ctx.org, ctx.conversation)
            raise
        if session is None:
            raise _exists(ctx)
        return session

    def _image(self, ctx: CallContext, image_id: str) -> CatalogImage:
        """The source's catalog image (its runtime and limits; the session keeps its id),
        else the caller's if operators have withdrawn it since."""
        image = self._catalog.find(image_id)
        return image if image is not None else self._catalog.select(ctx.base_image)

    def _refuse_memory(self, keep_memory: bool) -> None:
        reason = self._provider.lifecycle.memory_snapshot_refusal() if keep_memory else None
        if reason is not None:
            msg = f"this deployment cannot keep a sandbox's memory in a snapshot: {reason}"
            raise SnapshotMemoryNotSupported(msg, reason=reason)

    def _refuse_existing(self, ctx: CallContext) -> None:
        if self._sessions.describe(ctx) is not None:
            raise _exists(ctx)


def _artifacts(record: SnapshotRecord) -> SnapshotArtifacts:
    return SnapshotArtifacts(
        record.snapshot_id,
        record.image,
        record.workspace,
        record.workspace_bytes,
        record.workspace_allocated_bytes,
        record.image_bytes,
        record.layer,
        record.copy_on_write,
    )


def _exists(ctx: CallContext) -> ConversationExists:
    msg = (
        f"conversation {ctx.conversation!r} has a sandbox already: a fork or a start from "
        "a snapshot makes a new conversation"
    )
    return ConversationExists(msg, conversationId=ctx.conversation)


def _limit_reached(limit: int) -> SnapshotLimitReached:
    msg = (
        f"the organisation has {limit} snapshots, the limit (SIESTA_SNAPSHOTS__MAX_PER_ORG): "
        "delete one first"
    )
    return SnapshotLimitReached(msg, limit=limit)
