"""E2B's sandbox lifecycle on Siesta's sessions.

An E2B sandbox *is* a conversation: its id is the conversation id, its org the
token's, its user the token's name. So it has a lease, counts against capacity,
goes through the idle tiers, carries the ownership labels, and reconciliation
knows it like any other; ``/v1/conversations/{sandboxId}`` (with the same org)
reaches the same sandbox. What E2B adds is kept in an ``E2bSandbox`` record: the
template, metadata, environment, access token, whether its ports are public, and
the timeout after which the sandbox is killed (or paused, when created with
auto-pause).

Everything a create asks for is stored before the sandbox is provisioned: its
network rules, then its record (the record is what a retry with the same
``Idempotency-Key``, ``list`` and ``connect`` find). So whoever reaches the sandbox,
from its first command on, finds it as private and as narrowed as it was asked for,
even when the instance making it dies half way.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import replace

from runtime.core.context import CallContext
from runtime.core.errors import NotFound
from runtime.core.network_rules import NetworkRules
from runtime.core.records import E2bSandbox, SnapshotRecord
from runtime.e2b.settings import E2bSettings
from runtime.images.catalog import ImageCatalog
from runtime.sandbox.snapshots import SnapshotNotFound, Snapshots
from runtime.sandbox.snapshots.service import ID_PREFIX as SNAPSHOT_ID_PREFIX
from runtime.seams.stores import E2bStore, NetworkRuleStore
from runtime.sessions.manager import SessionManager

log = logging.getLogger(__name__)

ID_ALPHABET = string.ascii_lowercase + string.digits
ID_LENGTH = 20
"""E2B's ids are ``[a-z0-9]`` (the SDKs put them in paths and host names unencoded)."""


class TemplateNotFound(NotFound):
    code = "template_not_found"


class SandboxNotFound(NotFound):
    code = "sandbox_not_found"


class E2bSandboxes:
    def __init__(
        self,
        store: E2bStore,
        sessions: SessionManager,
        catalog: ImageCatalog,
        settings: E2bSettings,
        *,
        delete: Callable[[CallContext], object],
        suspend: Callable[[CallContext], object],
        hold: Callable[[str], contextlib.AbstractContextManager[object]],
        clock: Callable[[], float] = time.time,
        stop: Callable[[CallContext], object] | None = None,
        snapshots: Snapshots | None = None,
        network_rules: NetworkRuleStore,
    ) -> None:
        """``delete`` tears a conversation down (sandbox, workspace, files, log);
        ``suspend`` pauses its sandbox now (memory kept); ``hold`` holds a lease (one
        create per ``Idempotency-Key`` at a time, across instances); ``stop`` stops its
        sandbox now (memory freed, disk kept: a pause without memory);
        ``network_rules`` holds each conversation's own egress rules."""
        self._network_rules = network_rules
        self._stop = stop or suspend
        self._snapshots = snapshots
        """A template id may name one of the org's snapshots: the sandbox starts from it."""
        self._store = store
        self._sessions = sessions
        self._catalog = catalog
        self._settings = settings
        self._delete = delete
        self._suspend = suspend
        self._hold = hold
        self._clock = clock

    @staticmethod
    def context(sandbox: E2bSandbox) -> CallContext:
        """The conversation an E2B sandbox is."""
        return CallContext(
            org=sandbox.org,
            user=sandbox.owner,
            conversation=sandbox.sandbox_id,
            base_image=sandbox.template,
        )

    def create(
        self,
        org: str,
        owner: str,
        template: str,
        *,
        timeout_seconds: int | None = None,
        metadata: dict[str, str] | None = None,
        env_vars: dict[str, str] | None = None,
        auto_pause: bool = False,
        auto_resume: bool = False,
        public_traffic: bool = True,
        mask_request_host: str | None = None,
        network: NetworkRules | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[E2bSandbox, bool]:
        """A new sandbox of ``template``, running when this returns, and True; with an
        ``idempotency_key`` an earlier create used (a retry), that sandbox and False.
        ``network``: its egress rules (``None``: none of its own); ``public_traffic``:
        whether its ports answer without its traffic access token."""

        def make() -> E2bSandbox:
            snapshot = self._snapshot_named(org, template)
            image = self._catalog.find(snapshot.image_id if snapshot else template)
            if snapshot is None and (image is None or not image.enabled):
                enabled = ", ".join(self._catalog.selection_of(i) for i in self._catalog.enabled())
                msg = f"template {template!r} not found (the catalog's enabled images: {enabled})"
                raise TemplateNotFound(msg, templateID=template)
            # A snapshot's template is its version as an E2B client names it: the id
            # alone for its default tag (``base``), else ``id:tag``.
            named = template
            if snapshot is not None:
                named = self._catalog.selection_of(image) if image else snapshot.image_id
            sandbox = self.new_record(
                org,
                owner,
                named,
                timeout_seconds=timeout_seconds,
                metadata=metadata,
                env_vars=env_vars,
                auto_pause=auto_pause,
                auto_resume=auto_resume,
                public_traffic=public_traffic,
                mask_request_host=mask_request_host,
                idempotency_key=idempotency_key,
            )
            return self._create(sandbox, network, snapshot, template)

        if idempotency_key is None:
            return make(), True
        with self._hold(f"e2b-create/{org}/{idempotency_key}"):
            for sandbox in self._store.list_e2b(org):
                if sandbox.idempotency_key == idempotency_key:
                    return sandbox, False
            return make(), True

    def new_record(
        self,
        org: str,
        owner: str,
        template: str,
        *,
        timeout_seconds: int | None,
        metadata: dict[str, str] | None,
        env_vars: dict[str, str] | None,
        auto_pause: bool,
        auto_resume: bool,
        public_traffic: bool,
        mask_request_host: str | None = None,
        idempotency_key: str | None = None,
    ) -> E2bSandbox:
        """The record of a sandbox about to be made, with a new id (not stored yet)."""
        now = self._clock()
        return E2bSandbox(
            org=org,
            sandbox_id="".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH)),
            owner=owner,
            template=template,
            access_token=secrets.token_urlsafe(32),
            started_at=now,
            end_at=now + self._timeout(timeout_seconds),
            on_timeout="pause" if auto_pause else "kill",
            auto_resume=auto_resume,
            metadata=dict(metadata or {}),
            env_vars=dict(env_vars or {}),
            idempotency_key=idempotency_key,
            public_traffic=public_traffic,
            mask_request_host=mask_request_host,
        )

    def record(self, sandbox: E2bSandbox, network: NetworkRules | None) -> None:
        """Store what a sandbox is before it is made: its rules first, then the record
        by which it is found (recorded first: whatever provisioning leaves behind, the
        timeout removes; ``discard`` removes both)."""
        if network is not None:
            self._network_rules.set_network_rules(sandbox.org, sandbox.sandbox_id, network)
        self._store.put_e2b(sandbox)

    def network_rules(self, sandbox: E2bSandbox) -> NetworkRules | None:
        """The sandbox's own egress rules (``None``: none set)."""
        return self._network_rules.network_rules(sandbox.org, sandbox.sandbox_id)

    def discard(self, sandbox: E2bSandbox) -> None:
        """A sandbox whose making failed: its conversation (rules included) and record."""
        self._delete(self.context(sandbox))
        self._store.delete_e2b(sandbox.org, sandbox.sandbox_id)

    def started(self, sandbox: E2bSandbox) -> E2bSandbox:
        """The recorded sandbox, its timeout counted from now: it has just started."""
        current = self.get(sandbox.org, sandbox.sandbox_id)
        now = self._clock()
        restarted = replace(
            current, started_at=now, end_at=now + (current.end_at - current.started_at)
        )
        self._store.put_e2b(restarted)
        return restarted

    def _create(
        self,
        sandbox: E2bSandbox,
        network: NetworkRules | None,
        snapshot: SnapshotRecord | None,
        template: str,
    ) -> E2bSandbox:
        self.record(sandbox, network)
        try:
            if snapshot is not None and self._snapshots is not None:
                self._snapshots.start(self.context(sandbox), snapshot.snapshot_id)
            else:
                with self._sessions.operation(self.context(sandbox)):
                    pass  # provisioned (from the warm pool when it has one) and running
        except BaseException:
            self.discard(sandbox)
            raise
        log.info("e2b sandbox %s of %s made from %s", sandbox.sandbox_id, sandbox.org, template)
        return sandbox

    def _snapshot_named(self, org: str, template: str) -> SnapshotRecord | None:
        if self._snapshots is None or not template.startswith(SNAPSHOT_ID_PREFIX):
            return None
        with contextlib.suppress(SnapshotNotFound):
            return self._snapshots.get(org, template.split(":", 1)[0])  # E2B may add a tag
        return None

    def get(self, org: str, sandbox_id: str) -> E2bSandbox:
        sandbox = self._store.get_e2b(org, sandbox_id)
        if sandbox is None:
            msg = f"sandbox {sandbox_id} not found"
            raise SandboxNotFound(msg, sandboxID=sandbox_id)
        return sandbox

    def running_everywhere(self) -> list[E2bSandbox]:
        """Every org's running sandboxes: a signed file URL on the path form names none,
        its signature does. Read from the store's timeout index (every sandbox has an
        entry there), one read per sandbox on Redis."""
        return [s for s in self._store.due_e2b(math.inf) if s.state == "running"]

    def list(self, org: str) -> list[E2bSandbox]:
        return self._store.list_e2b(org)

    def find(self, sandbox_id: str) -> E2bSandbox | None:
        """The sandbox of this id, whichever org's: envd calls and a port's host name
        no org (the id is random, and the sandbox's own tokens are checked instead)."""
        return self._store.find_e2b(sandbox_id)

    def kill(self, org: str, sandbox_id: str) -> bool:
        """Whether there was such a sandbox; its conversation is deleted with it."""
        sandbox = self._store.get_e2b(org, sandbox_id)
        if sandbox is None:
            return False
        self._delete(self.context(sandbox))  # the record goes with its conversation
        self._store.delete_e2b(org, sandbox_id)  # (when the teardown was left pending)
        log.info("e2b sandbox %s of %s killed", sandbox_id, org)
        return True

    def set_timeout(self, org: str, sandbox_id: str, timeout_seconds: int) -> E2bSandbox:
        """The sandbox ends ``timeout_seconds`` from now (shorter or longer)."""
        sandbox = replace(
            self.get(org, sandbox_id), end_at=self._clock() + self._timeout(timeout_seconds)
        )
        self._store.put_e2b(sandbox)
        return sandbox

    def connect(
        self, org: str, sandbox_id: str, timeout_seconds: int | None
    ) -> tuple[E2bSandbox, bool]:
        """The sandbox, running (resumed if it was paused: the second value says so).
        A running sandbox's timeout is only ever extended, never shortened."""
        sandbox = self.get(org, sandbox_id)
        resumed = sandbox.state == "paused"
        end_at = self._clock() + self._timeout(timeout_seconds)
        sandbox = replace(
            sandbox, state="running", end_at=end_at if resumed else max(end_at, sandbox.end_at)
        )
        with self._sessions.operation(self.context(sandbox)):
            pass  # resumed from whatever tier it is in
        self._store.put_e2b(sandbox)
        return sandbox, resumed

    def pause(self, org: str, sandbox_id: str, *, keep_memory: bool = True) -> bool:
        """Pause the sandbox now: memory and processes kept (the paused tier), or with
        ``keep_memory=False`` only its disk (the stopped tier: ``connect`` starts it
        again, its processes gone). False when it was paused already. Until ``connect``,
        envd calls answer "not running", and the timeout no longer applies."""
        sandbox = self.get(org, sandbox_id)
        if sandbox.state == "paused":
            return False
        (self._suspend if keep_memory else self._stop)(self.context(sandbox))
        # Read again: a set_timeout or metadata meanwhile is kept, only the state changes.
        sandbox = self.get(org, sandbox_id)
        self._store.put_e2b(replace(sandbox, state="paused", end_at=float("inf")))
        log.info("e2b sandbox %s of %s paused on request", sandbox_id, org)
        return True

    def sweep(self) -> int:
        """Kill (or pause) every sandbox whose timeout has passed; how many."""
        handled = 0
        for sandbox in self._store.due_e2b(self._clock()):
            try:
                if sandbox.on_timeout == "pause":
                    if sandbox.state != "paused":
                        self._suspend(self.context(sandbox))
                        self._store.put_e2b(replace(sandbox, state="paused", end_at=float("inf")))
                else:
                    self.kill(sandbox.org, sandbox.sandbox_id)
                handled += 1
            except Exception:  # one sandbox's trouble must not stop the others
                log.exception("e2b sandbox %s: its timeout could not be applied", sandbox)
        return handled

    def _timeout(self, requested: int | None) -> int:
        if requested is None:
            return self._settings.default_timeout_seconds
        return max(1, min(requested, self._settings.max_timeout_seconds))
