"""Shared state: one narrow protocol per concern, and the bundle a backend opens.

Concerns: sessions (fenced records), leases, capacity slots, conversation files,
deletion markers, the tool-executions log, the warm pool, idempotency keys, the
deployment id, the egress credentials revoked by deletions, and each conversation's
network rules and refusal count, the agents registered per org, the orgs' memory
banks, the operators' image catalog with its builds, the audit trail of their
actions, and their console sessions. Each backend implements every protocol over its
one connection:

* ``sqlite/`` — the embedded default: one file, one service instance;
* ``redis/`` — several instances sharing one Redis.

Both pass the same contract tests (``tests/runtime/store/``). Every change to a
session record carries the fence of the lease its writer holds; a store refuses
a change whose fence is lower than the one it already has, so a holder that
stalled past its lease can never overwrite a newer holder's state.

Over 400 lines on purpose: it is the one list of what a backend must implement, each
protocol a few lines; split, a backend's author would no longer see every concern in
one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from siesta_contract.tools import ExecutionStatus

from runtime.core.knowledge_records import ContentVersion, KnowledgeBase, KnowledgeChunk
from runtime.core.network_rules import EgressRefusals, NetworkRules
from runtime.core.operator_records import AuditEntry, AuditFilter, ConsoleSession, ImageBuild
from runtime.core.records import (
    AgentRecord,
    E2bSandbox,
    EgressRevocation,
    ExecutionFilter,
    FileRecord,
    IdempotencyClaim,
    IdempotencyEntry,
    KeptResponse,
    MemoryBank,
    MemoryEntry,
    PoolMember,
    SealedSecret,
    SessionRecord,
    SnapshotRecord,
    StagingCount,
    ToolExecution,
)


class SessionStore(Protocol):
    """The conversation → session records, written with the lease's fence."""

    def get_session(self, org: str, conversation: str) -> SessionRecord | None:
        """The conversation's session, or ``None`` if it has none."""

    def put_session(self, record: SessionRecord) -> bool:
        """Insert or replace the conversation's session; False if ``record.fence``
        is lower than the stored record's (a newer holder wrote it)."""

    def touch_session(
        self, org: str, conversation: str, session_id: str, at: float, fence: int
    ) -> bool:
        """Set ``last_used_at`` if the conversation still has that session and the
        fence is not stale."""

    def delete_session(self, org: str, conversation: str, fence: int) -> SessionRecord | None:
        """Remove and return the conversation's session, unless the fence is stale."""

    def list_sessions(self) -> list[SessionRecord]:
        """Every session record (for reconciliation and metrics)."""


class LeaseStore(Protocol):
    """Per-key leases with an owner token, a TTL and a fence from one counter."""

    def acquire_lease(self, key: str, owner: str, ttl: float) -> int | None:
        """Take the lease on ``key`` for ``ttl`` seconds if it is free (or expired).

        Returns a fence from one counter that only grows, or ``None`` if held.
        """

    def renew_lease(self, key: str, owner: str, ttl: float) -> bool:
        """Extend the lease if ``owner`` still holds it (compare-and-extend)."""

    def release_lease(self, key: str, owner: str) -> bool:
        """Drop the lease if ``owner`` holds it (compare-and-delete) and wake a waiter."""

    def wait_for_release(self, key: str, timeout: float) -> None:
        """Block until the lease on ``key`` may be free, at most ``timeout`` seconds."""

    def lease_owner(self, key: str) -> str | None:
        """Who holds the lease on ``key`` right now."""

    def clear_expired_leases(self) -> int:
        """Drop leases whose holders died (no-op where the store expires them itself)."""


class CapacityStore(Protocol):
    """Who counts against which capacity scope (org, user, host)."""

    def claim_slot(self, member: str, scopes: list[tuple[str, int]]) -> int | None:
        """Count ``member`` in every scope at once, if each has room under its limit.

        A member already counted in a scope uses no new room there. Returns
        ``None`` on success, else the index of the first scope that is full
        (and counts the member nowhere).
        """

    def release_slot(self, member: str, scopes: list[str]) -> None:
        """Stop counting ``member`` in these scopes."""

    def slot_members(self, scope: str) -> list[str]:
        """Who is counted in ``scope``."""


class FileStore(Protocol):
    """Conversation files' metadata (their bytes live in the blob store)."""

    def add_file(self, record: FileRecord) -> None:
        """Record a new conversation file (ids are never reused)."""

    def list_files(self, org: str, conversation: str) -> list[FileRecord]:
        """The conversation's files, oldest first."""

    def get_file(self, org: str, conversation: str, file_id: str) -> FileRecord | None:
        """One file of the conversation; another conversation's id finds nothing."""

    def replace_file(self, record: FileRecord) -> bool:
        """Update an existing file's size, type and hash (its bytes were replaced)."""

    def delete_files(self, org: str, conversation: str) -> list[FileRecord]:
        """Forget the conversation's files and return them (to delete their blobs);
        its staging count goes too."""

    def count_staged(
        self, org: str, conversation: str, session_id: str, items: dict[str, int], limit: int
    ) -> StagingCount:
        """Add the sizes of ``items`` (staging key -> bytes) not yet counted to the
        conversation's staged total, all or nothing: when the total would pass
        ``limit``, nothing is counted. The count belongs to one session: another
        ``session_id`` (the sandbox was replaced) starts again from zero."""


class DeletionStore(Protocol):
    """Conversations deleted while an operation held them, torn down later."""

    def mark_deleted(self, key: str) -> None:
        """Remember that the conversation was deleted while busy."""

    def deleted_keys(self) -> list[str]:
        """Conversations deleted while busy, not yet torn down."""

    def clear_deleted(self, key: str) -> None:
        """The conversation's teardown is done."""


class ExecutionStore(Protocol):
    """The Tool Executions log, with the approvals calls waited for."""

    def add(self, execution: ToolExecution) -> None:
        """Record a new execution."""

    def get(self, org: str, execution_id: str) -> ToolExecution | None:
        """One execution of the org; another org's id finds nothing."""

    def save(self, execution: ToolExecution) -> None:
        """Write the execution's current state; nothing when it is gone (its
        conversation was deleted while it ran): a save never brings an entry back."""

    def decide(
        self,
        org: str,
        execution_id: str,
        approval: dict[str, Any],
        status: ExecutionStatus,
        now: float,
    ) -> ToolExecution | None:
        """Move a pending execution whose deadline is after ``now`` to ``status`` with
        its approval, once, and return it settled (``ToolExecution.settled``). A second
        decision (a replay), or one at or past the deadline, finds nothing: ``None``."""

    def expire(self, org: str, execution_id: str, now: float) -> ToolExecution | None:
        """Move a pending execution whose deadline is at or before ``now`` to
        ``expired``, settled, and return it; ``None`` when it is not such."""

    def expire_pending(self, now: float) -> list[ToolExecution]:
        """Expire every org's pending executions whose deadline has passed."""

    def remove_older_than(self, cutoff: float) -> int:
        """Delete every org's executions created before ``cutoff``; how many."""

    def find(self, org: str | None, where: ExecutionFilter) -> list[ToolExecution]:
        """The org's executions matching ``where``, newest first (``org=None``: every
        org's, for the operators' console)."""

    def forget_conversation(self, org: str, conversation: str, now: float) -> int:
        """Remove every entry of the conversation (it was deleted), at once, and
        cancel its calls still waiting for approval: until its deadline, such an
        approval is ``cancelled`` and a decision finds nothing. How many went."""

    def cancelled(self, org: str, execution_id: str, now: float) -> bool:
        """Whether ``execution_id`` waited for approval when its conversation was
        deleted, and its deadline is still after ``now``."""


class PoolStore(Protocol):
    """The warm pool's ready sandboxes, claimed by one conversation each."""

    def add_pool_member(self, member: PoolMember) -> None:
        """A sandbox is ready to be claimed."""

    def claim_pool_member(self, image_id: str) -> PoolMember | None:
        """Take the oldest ready sandbox of the image, atomically: two claimers never
        get the same one."""

    def remove_pool_member(self, sandbox_id: str) -> bool:
        """Forget a member (trimmed or found gone); False if it was not there."""

    def pool_members(self) -> list[PoolMember]:
        """Every ready member, oldest first."""

    def note_pool_arrival(self, image_id: str, at: float, forget_before: float) -> None:
        """A new conversation asked for a sandbox of the image (whether the pool had one
        or not); arrivals before ``forget_before`` are forgotten."""

    def pool_arrivals(self, image_id: str, since: float) -> list[float]:
        """When the image's arrivals from ``since`` on came, oldest first."""


class E2bStore(Protocol):
    """Sandboxes made through the E2B API (``E2bSandbox``), by org."""

    def put_e2b(self, sandbox: E2bSandbox) -> None:
        """Add or replace."""

    def get_e2b(self, org: str, sandbox_id: str) -> E2bSandbox | None: ...

    def list_e2b(self, org: str) -> list[E2bSandbox]:
        """The org's sandboxes, oldest first."""

    def find_e2b(self, sandbox_id: str) -> E2bSandbox | None:
        """The sandbox of that id in whichever org (envd calls name no org: the id is
        random and the access token proves the caller knows it)."""

    def delete_e2b(self, org: str, sandbox_id: str) -> bool:
        """Whether there was one to delete."""

    def due_e2b(self, now: float) -> list[E2bSandbox]:
        """Every org's sandboxes whose ``end_at`` has passed."""


class IdempotencyStore(Protocol):
    """``Idempotency-Key``s: claimed by the request that runs, then its kept answer.

    ``key`` is already scoped (token, org, key); ``owner`` is the running request. An
    entry lives ``ttl`` seconds from its first claim (then from its answer); a running
    claim is *held* for ``hold`` seconds at a time. A claim whose hold lapsed (its
    instance died) can be taken over; the entry remembers the attempts and where an
    attempt handed its work over (``mark_dispatched``), so the taker-over can collect
    that run's outcome rather than run it again.
    """

    def claim_key(
        self,
        key: str,
        fingerprint: str,
        owner: str,
        hold: float,
        *,
        ttl: float,
        conversation: str | None = None,
    ) -> IdempotencyClaim | IdempotencyEntry:
        """Claim ``key`` for ``owner`` if nobody holds it (absent, expired, or its
        running claim's hold lapsed): an ``IdempotencyClaim``. Otherwise what it holds
        (a running claim, a kept answer, or another request's fingerprint).
        ``conversation`` (``org/conversation``): the key goes when the conversation does."""

    def renew_key(self, key: str, owner: str, hold: float) -> bool:
        """Extend a running claim's hold by ``hold`` seconds if ``owner`` still has it."""

    def mark_dispatched(self, key: str, owner: str, target: str) -> bool:
        """Record that ``owner`` hands the request's work to ``target`` (a sandbox), before
        it does; False (hand nothing over) when ``owner`` no longer has the claim."""

    def complete_key(self, key: str, owner: str, response: KeptResponse, ttl: float) -> bool:
        """Keep the answer for ``ttl`` seconds, if ``owner`` still has the claim."""

    def release_key(self, key: str, owner: str) -> bool:
        """Give up a running claim (nothing to keep): a retry runs again, or, when the
        work was handed over, takes over at once and collects its outcome."""

    def forget_conversation(self, conversation: str) -> int:
        """Drop every key claimed for ``conversation`` (``org/conversation``)."""


class DeploymentStore(Protocol):
    def claim_deployment_id(self, candidate: str) -> str:
        """The deployment id kept in this store; ``candidate`` becomes it if none is
        kept yet (set-if-absent, so concurrent first starts agree)."""

    def claim_egress_key(self, candidate: str) -> str:
        """The deployment's egress-proxy signing key (hex), set once like the id: every
        instance signs and checks sandbox credentials with the same key."""


class RevocationStore(Protocol):
    """Egress credentials revoked by their conversation's deletion: a log that every
    egress proxy reads on from where it left off, kept for a retention."""

    def revoke_egress(self, revocation: EgressRevocation, keep_seconds: float) -> None:
        """Record the revocation and, in the same step, drop those older than
        ``keep_seconds`` before it."""

    def egress_revocations(
        self, after: str | None, limit: int
    ) -> tuple[list[EgressRevocation], str | None]:
        """Up to ``limit`` revocations recorded after the position ``after`` (``None``:
        from the oldest kept), in the order they were recorded, and the position to
        read on from (``after`` itself when there is nothing new)."""


class NetworkRuleStore(Protocol):
    """Each conversation's own network rules (read by every egress proxy, briefly
    cached) and the count of its requests the proxies refused."""

    def set_network_rules(self, org: str, conversation: str, rules: NetworkRules) -> None:
        """Replace the conversation's rules."""

    def network_rules(self, org: str, conversation: str) -> NetworkRules | None:
        """The conversation's rules, ``None`` when none were set."""

    def add_egress_refusals(
        self, org: str, conversation: str, refusals: EgressRefusals, keep_seconds: float
    ) -> None:
        """Add ``refusals.count`` to the conversation's count and make ``refusals``'
        host and reason the last ones; the count is forgotten ``keep_seconds`` after
        its last refusal."""

    def egress_refusals(self, org: str, conversation: str) -> EgressRefusals | None:
        """The conversation's count, ``None`` when nothing was refused (recently)."""

    def forget_network(self, org: str, conversation: str) -> None:
        """The conversation's rules and count removed (it is being deleted)."""

    def put_secret(self, secret: SealedSecret, limit: int) -> bool:
        """Add or replace the org's secret of that name; ``False`` (nothing kept) when
        the name is new and the org has ``limit`` secrets already."""

    def secret(self, org: str, name: str) -> SealedSecret | None: ...

    def org_secrets(self, org: str) -> list[SealedSecret]:
        """The org's secrets, by name."""

    def delete_secret(self, org: str, name: str) -> bool:
        """``False`` when there was none."""


class SnapshotStore(Protocol):
    """Snapshot records, per org."""

    def add_snapshot(self, record: SnapshotRecord, limit: int) -> bool:
        """Insert the record unless its org has ``limit`` snapshots already (False)."""

    def get_snapshot(self, org: str, snapshot_id: str) -> SnapshotRecord | None: ...

    def list_snapshots(self, org: str) -> list[SnapshotRecord]:
        """The org's snapshots, oldest first."""

    def delete_snapshot(self, org: str, snapshot_id: str) -> SnapshotRecord | None:
        """Remove and return the org's record (``None``: none, or another org's)."""

    def snapshot_ids(self) -> set[str]:
        """Every org's snapshot ids (clean-up of what has no record)."""


class AgentStore(Protocol):
    """Agents registered per org (their configuration, as JSON)."""

    def put_agent(self, record: AgentRecord, limit: int) -> bool:
        """Insert or replace the org's agent; a new one only while the org has fewer
        than ``limit`` (False: not stored)."""

    def get_agent(self, org: str, agent_id: str) -> AgentRecord | None: ...

    def list_agents(self, org: str) -> list[AgentRecord]:
        """The org's agents, by id."""

    def delete_agent(self, org: str, agent_id: str) -> bool:
        """Remove the org's agent (False: there was none)."""


class MemoryStore(Protocol):
    """Banks per org, oldest first (``add_bank``: False when the org has ``limit``);
    entries per bank key in the order added, deleted with their bank."""

    def add_bank(self, bank: MemoryBank, limit: int) -> bool: ...

    def get_bank(self, org: str, bank_id: str) -> MemoryBank | None: ...

    def list_banks(self, org: str) -> list[MemoryBank]: ...

    def delete_bank(self, org: str, bank_id: str) -> bool: ...

    def add_entry(self, entry: MemoryEntry, limit: int) -> int | None:
        """Append unless the key holds ``limit``: its count after, 0 if full, None if no bank."""

    def entries(
        self, org: str, bank_id: str, key: str, *, newest_first: bool, limit: int
    ) -> tuple[list[MemoryEntry], int]:
        """Up to ``limit`` of the key's entries from one end, and how many it holds."""


class KnowledgeStore(Protocol):
    """Knowledge bases per org, oldest first; each base's content versions and their
    chunks, deleted with it. Version ids are unique in an org. A version's chunks are
    searchable once it is ``ready``; ``generation`` changes whenever what a base's
    search sees does (a version ready or removed), so indexes built from ``chunks``
    know when to build again."""

    def add_base(self, base: KnowledgeBase, limit: int) -> bool:
        """Add unless the org has ``limit`` bases (False)."""

    def get_base(self, org: str, base_id: str) -> KnowledgeBase | None: ...

    def list_bases(self, org: str) -> list[KnowledgeBase]: ...

    def delete_base(self, org: str, base_id: str) -> bool:
        """Remove the base, its versions and their chunks (False: there was none)."""

    def add_version(self, version: ContentVersion, limit: int) -> bool | None:
        """Add unless the base holds ``limit`` versions (False); None: no such base."""

    def get_version(self, org: str, version_id: str) -> ContentVersion | None: ...

    def list_versions(self, org: str, base_id: str) -> list[ContentVersion]:
        """Oldest first."""

    def save_version(self, version: ContentVersion) -> bool:
        """Replace the version's record (False: removed meanwhile, nothing stored)."""

    def claim_version(self, now: float, stale_before: float) -> ContentVersion | None:
        """Take a version to index: a queued one, or one an indexer took before
        ``stale_before`` and never finished; it is stored as ``indexing`` at ``now``."""

    def finish_version(
        self, version: ContentVersion, chunks: list[KnowledgeChunk], limit: int
    ) -> bool | None:
        """Store the chunks and ``version`` (``ready``) at once, unless the base would
        hold more than ``limit`` chunks (False, nothing stored); None: removed meanwhile."""

    def delete_version(self, org: str, base_id: str, version_id: str) -> bool:
        """Remove the version and its chunks (False: there was none)."""

    def chunks(self, org: str, base_id: str) -> list[KnowledgeChunk]:
        """Every chunk of the base's ready versions."""

    def chunk_count(self, org: str, base_id: str) -> int: ...

    def generation(self, org: str, base_id: str) -> int: ...


class CatalogStore(Protocol):
    """The operators' image catalog, shared by every instance: each image version
    (``id:tag``) as JSON (its shape is ``runtime.images.catalog.CatalogImage``'s), the
    default tag of each image id, and the builds with their logs."""

    def catalog(self) -> tuple[dict[str, str], dict[str, str]]:
        """Every image version (ref → JSON) and every id's default tag, read together."""

    def add_image(self, ref: str, body: str) -> bool:
        """Store a new image version; False (and nothing changes) if ``ref`` exists."""

    def replace_image(self, ref: str, expected: str, body: str) -> bool:
        """Compare-and-set: replace the version's JSON only if it is still ``expected``."""

    def set_default_tag(self, image_id: str, tag: str, *, only_if_unset: bool = False) -> bool:
        """Make ``tag`` the id's default (``only_if_unset``: unless it has one)."""

    def put_build(self, build: ImageBuild) -> None:
        """Insert or replace a build's record."""

    def get_build(self, build_id: str) -> ImageBuild | None: ...

    def list_builds(self, ref: str, limit: int) -> list[ImageBuild]:
        """The image version's builds, newest first."""

    def append_build_log(self, build_id: str, lines: list[str], keep: int) -> int:
        """Append lines to the build's log while it holds fewer than ``keep``; returns
        how many it holds after (later lines are dropped: the record keeps the error)."""

    def build_log(self, build_id: str, start: int) -> list[str]:
        """The log's lines from index ``start`` on."""


class AuditStore(Protocol):
    """The operators' actions, newest first, kept until pruned."""

    def add_audit(self, entry: AuditEntry) -> None: ...

    def list_audit(self, query: AuditFilter) -> list[AuditEntry]:
        """Entries matching every field set in ``query``, newest first."""

    def prune_audit(self, before: float) -> int:
        """Forget entries older than ``before``; returns how many went."""


class ConsoleSessionStore(Protocol):
    """Operators' web console sessions, under the SHA-256 of their cookie's id: every
    instance sharing the store knows a session another one opened."""

    def put_console_session(self, session: ConsoleSession) -> None:
        """Keep the session until its ``expires_at``."""

    def get_console_session(self, id_digest: str, now: float) -> ConsoleSession | None:
        """The session, ``None`` when there is none or it expired at or before ``now``."""

    def delete_console_session(self, id_digest: str) -> bool:
        """End the session (signed out); False when there was none."""


@dataclass(frozen=True)
class Stores:
    """Every concern of one backend, over its one connection."""

    sessions: SessionStore
    leases: LeaseStore
    capacity: CapacityStore
    files: FileStore
    deletions: DeletionStore
    executions: ExecutionStore
    pool: PoolStore
    idempotency: IdempotencyStore
    e2b: E2bStore
    deployment: DeploymentStore
    revocations: RevocationStore
    snapshots: SnapshotStore
    network: NetworkRuleStore
    agents: AgentStore
    memory: MemoryStore
    knowledge: KnowledgeStore
    catalog: CatalogStore
    audit: AuditStore
    console: ConsoleSessionStore
    ping: Callable[[], None]
    """Raises ``StateUnavailable`` when the backend cannot be reached."""
    close: Callable[[], None]
    """Releases the connection."""
