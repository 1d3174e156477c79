"""The runtime's parts, made from the settings over the backends in one place.

The backends themselves (the store, the provider, egress) are opened by the
composition root, ``runtime.wiring``, and handed in as ``Backends``: this module knows
them only by their seams (``runtime.seams``), so the HTTP app that holds ``Services``
never imports an implementation.

Over 400 lines: it is where every part is made and handed what it needs; the parts
themselves live in their packages.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from siesta_contract.agents import AgentConfig, Policy, UserInfo

from runtime.admin.audit import AuditLog
from runtime.admin.console_sessions import ConsoleSessions
from runtime.admin.images import CatalogAdmin
from runtime.agents import AgentGateway, build_gateway
from runtime.core.auth import TokenRegistry
from runtime.core.context import CallContext
from runtime.core.errors import SessionBusy, SiestaError
from runtime.core.network_rules import Allowlist
from runtime.core.records import IdempotencyClaim, SessionRecord, SessionStatus, conversation_key
from runtime.core.secrets import secret_values
from runtime.core.tracing_export import Shutdown, start_tracing
from runtime.core.upstreams import Upstreams
from runtime.e2b.sandboxes import E2bSandboxes
from runtime.egress.service import Egress, egress_key, revoke_credentials
from runtime.files.content import ContentReader
from runtime.files.conversation import ConversationFiles, LocalBlobStore
from runtime.images.build import DockerImageBuilder
from runtime.images.catalog import ImageCatalog
from runtime.jsexec.executor import JsExecutor
from runtime.jsexec.pool import WorkerPool
from runtime.knowledge.bases import KnowledgeBases
from runtime.knowledge.documents import DocumentSources, Indexing
from runtime.knowledge.fetch import DocumentFetcher
from runtime.knowledge.indexer import Indexer
from runtime.memory.banks import MemoryBanks
from runtime.memory.embedding import Embedder
from runtime.sandbox.filesystem import FsLimits, SandboxFilesystem
from runtime.sandbox.metadata import MetadataLimits
from runtime.sandbox.metrics import SandboxMeter
from runtime.sandbox.network import SandboxNetwork
from runtime.sandbox.operations import Sandbox
from runtime.sandbox.ports.connection import SandboxPorts
from runtime.sandbox.ports.tokens import PortTokens
from runtime.sandbox.processes import ProcessLimits, SandboxProcesses, runs_processes
from runtime.sandbox.secrets import OrgSecrets, secrets_environment
from runtime.sandbox.snapshots import SnapshotLeftovers, Snapshots
from runtime.sandbox.tiers import SandboxTiers
from runtime.sandbox.user_files import UserFiles
from runtime.sandbox.watchers import SharedWatchers
from runtime.seams.provider_settings import DockerProviderSettings
from runtime.seams.providers import SandboxProvider
from runtime.seams.stores import Stores
from runtime.sessions.capacity import Quotas
from runtime.sessions.fleet import Fleet
from runtime.sessions.gate import MakeGate
from runtime.sessions.idempotency import IdempotencyKeys
from runtime.sessions.leases import Lease, Leases
from runtime.sessions.lifecycle import Lifecycle
from runtime.sessions.manager import SessionManager
from runtime.sessions.pool import WarmPool
from runtime.sessions.reconcile import Reconciler
from runtime.settings import Settings
from runtime.tools.adapters.connections import connection_adapter
from runtime.tools.adapters.content import content_adapters
from runtime.tools.adapters.help import help_adapter
from runtime.tools.adapters.image import image_adapter
from runtime.tools.adapters.knowledge import knowledge_adapters
from runtime.tools.adapters.memory import memory_adapters
from runtime.tools.adapters.platform import platform_adapters
from runtime.tools.adapters.processes import process_adapters
from runtime.tools.adapters.search import firecrawl_adapters, google_search_adapter
from runtime.tools.adapters.system import batch_adapter, js_adapter, sandbox_adapters
from runtime.tools.adapters.web import page_client, web_fetch_adapter
from runtime.tools.agent_registry import AgentRegistry
from runtime.tools.catalog import Catalog, build_catalog
from runtime.tools.executions import ExecutionsSweep
from runtime.tools.executor import ApprovalRules, ToolExecutor
from runtime.tools.held_calls import admit_approved


def assemble_sessions(
    stores: Stores,
    provider: SandboxProvider,
    catalog: ImageCatalog,
    settings: Settings,
    clock: Callable[[], float] = time.time,
) -> tuple[SessionManager, Leases, Lifecycle, WarmPool]:
    """The session manager with its leases, capacity and lifecycle parts."""
    leases = Leases(stores.leases, settings.lease)
    lifecycle = Lifecycle(stores.sessions, stores.capacity, provider, settings.capacity)
    gate = MakeGate(settings.provision.concurrency, settings.provision.queue_limit)
    pool = WarmPool(
        stores.pool, stores.capacity, provider, catalog, settings.pool, settings.capacity, gate
    )
    quotas = Quotas(
        stores.capacity,
        stores.sessions,
        leases,
        lifecycle,
        settings.capacity,
        evict_pool_member=pool.evict,
    )
    sessions = SessionManager(
        stores.sessions,
        provider,
        catalog,
        settings.sandbox,
        leases,
        quotas,
        settings.lifecycle,
        clock,
        pool,
        admit=admit_approved(stores.executions),
        gate=gate,
    )
    return sessions, leases, lifecycle, pool


def _disk_limits(settings: Settings) -> tuple[int | None, int | None]:
    """The disk sizes the provider enforces, for results to name when a disk is full:
    Docker's loop file systems (a claim's size on Kubernetes is the cluster's business)."""
    if not isinstance(settings.provider, DockerProviderSettings):
        return None, None
    sandbox = settings.sandbox
    return sandbox.workspace_size_mb or None, sandbox.container_disk_mb or None


@dataclass(frozen=True)
class Backends:
    """What ``runtime.wiring`` opens from the settings, for ``Services.build``."""

    stores: Stores
    deployment_id: str
    egress: Egress
    provider: SandboxProvider


@dataclass
class Services:
    settings: Settings
    deployment_id: str
    catalog: ImageCatalog
    stores: Stores
    provider: SandboxProvider
    leases: Leases
    sessions: SessionManager
    files: ConversationFiles
    sandbox: Sandbox
    upstreams: Upstreams
    egress: Egress
    tokens: TokenRegistry = field(init=False)
    audit: AuditLog = field(init=False)
    images: CatalogAdmin = field(init=False)
    """The catalog's operators' side (``catalog`` is what everything else reads)."""
    pool: WarmPool = field(init=False)
    reconciler: Reconciler = field(init=False)
    js: JsExecutor = field(init=False)
    tools: ToolExecutor = field(init=False)
    stop_tracing: Shutdown | None = field(init=False, default=None)
    lifecycle: Lifecycle = field(init=False)
    e2b: E2bSandboxes = field(init=False)
    processes: SandboxProcesses = field(init=False)
    user_files: UserFiles = field(init=False)
    filesystem: SandboxFilesystem = field(init=False)
    snapshots: Snapshots = field(init=False)
    meter: SandboxMeter = field(init=False)
    tiers: SandboxTiers = field(init=False)
    network: SandboxNetwork = field(init=False)
    secrets: OrgSecrets = field(init=False)
    agents: AgentRegistry = field(init=False)
    ports: SandboxPorts = field(init=False)
    port_tokens: PortTokens = field(init=False)
    memory: MemoryBanks = field(init=False)
    knowledge: KnowledgeBases = field(init=False)
    indexer: Indexer = field(init=False)
    """Indexes documents added to knowledge bases; started by a serving instance."""
    fleet: Fleet = field(init=False)
    """Every instance's sandboxes, read for the console and the gauges."""
    console_sessions: ConsoleSessions = field(init=False)
    idempotency_keys: IdempotencyKeys = field(init=False)
    _kept_running_at: float = field(init=False, default=0.0)

    @classmethod
    def build(
        cls,
        settings: Settings,
        backends: Backends,
        transport: httpx.BaseTransport | None = None,
    ) -> Services:
        """Everything, from settings over the opened ``backends`` (``runtime.wiring``
        opens them); ``transport`` carries every upstream HTTP call (tests may pass
        their own)."""
        stores, deployment_id = backends.stores, backends.deployment_id
        egress, provider = backends.egress, backends.provider
        audit = AuditLog(stores.audit, settings.audit)
        images = CatalogAdmin(
            stores.catalog,
            stores.sessions,
            stores.leases,
            audit,
            settings.images,
            (
                DockerImageBuilder(network=egress.build_network())
                if isinstance(settings.provider, DockerProviderSettings)
                else None
            ),
            secrets=[*secret_values(settings), *egress.secrets()],
        )
        images.seed()  # the YAML file's versions the store lacks (a first start: all)
        catalog = images.catalog
        sessions, leases, lifecycle, pool = assemble_sessions(stores, provider, catalog, settings)
        blobs = LocalBlobStore(settings.data_dir / "blobs")
        files = ConversationFiles(stores.files, blobs, settings.files)
        sandbox = Sandbox(
            sessions,
            provider,
            files,
            settings.command,
            settings.files,
            egress,
            settings.sandbox,
            _disk_limits(settings),
            stores.idempotency,
        )
        services = cls(
            settings,
            deployment_id,
            catalog,
            stores,
            provider,
            leases,
            sessions,
            files,
            sandbox,
            Upstreams(settings.tools.http_timeout_seconds, transport),
            egress,
        )
        services.tokens = TokenRegistry.from_settings(settings.tokens, settings.api_token)
        services.console_sessions = ConsoleSessions(
            stores.console, services.tokens, settings.console
        )
        services.idempotency_keys = IdempotencyKeys(stores.idempotency, settings.idempotency)
        services.fleet = Fleet(
            stores.sessions, stores.capacity, stores.pool, provider.lifecycle, settings.capacity
        )
        services.audit = audit
        services.images = images
        services.pool = pool
        services.reconciler = Reconciler(
            stores.sessions,
            stores.deletions,
            provider,
            leases,
            lifecycle,
            settings.lifecycle,
            settings.reconcile,
            services.teardown_conversation,
            pool=pool,
            busy=functools.partial(runs_processes, provider.inside),
            sweeps=[
                ExecutionsSweep(stores.executions, settings.tools),
                SnapshotLeftovers(
                    stores.snapshots,
                    provider.lifecycle,
                    settings.snapshots.leftover_grace_seconds,
                ),
            ],
        )
        gateway = build_gateway(settings.agents, services.upstreams.client("agents"))
        services.js = JsExecutor(
            WorkerPool(settings.js), files, gateway, settings.js, settings.agents
        )
        services.lifecycle = lifecycle
        services.processes = SandboxProcesses(
            sessions,
            provider.inside,
            egress,
            ProcessLimits(
                settings.processes.max_per_sandbox,
                settings.processes.reader_buffer_bytes,
                settings.command.kill_grace_seconds,
                settings.processes.ring_bytes,
            ),
        )
        embedder = Embedder()  # one model in memory for memory banks and knowledge bases
        services.memory = MemoryBanks(stores.memory, settings.memory, embedder)
        services.knowledge, services.indexer = _knowledge(
            settings, stores, blobs, files, services.upstreams, embedder
        )
        services.tools = services._tool_executor(gateway)  # its adapters use the processes
        services.user_files = UserFiles(
            sessions,
            provider.inside,
            settings.command.kill_grace_seconds,
            MetadataLimits(settings.files.max_metadata_keys, settings.files.max_metadata_bytes),
        )
        services.filesystem = SandboxFilesystem(
            services.user_files,
            FsLimits(
                max_watchers=settings.processes.max_watchers_per_sandbox,
                max_watcher_bytes=settings.processes.max_watcher_bytes,
                max_listing_bytes=settings.files.max_listing_bytes,
                max_listing_entries=settings.files.max_listing_entries,
            ),
            SharedWatchers(sessions, provider.inside),
        )
        services.network = SandboxNetwork(stores.network, Allowlist.parse(settings.egress.allow))
        services.agents = AgentRegistry(stores.agents, settings.tools.max_registered_agents)
        services.meter = SandboxMeter(
            sessions.describe,
            provider.lifecycle.usage,
            settings.metrics,
            # Without egress there is no proxy to refuse anything: not counted (null).
            egress_refusals=services.network.refusal_count if settings.egress.enabled else None,
        )
        services.tiers = SandboxTiers(sessions, leases, lifecycle, provider.lifecycle)
        services.snapshots = Snapshots(
            stores.snapshots,
            sessions,
            provider,
            catalog,
            settings.snapshots,
            network_rules=stores.network,
        )
        services.e2b = E2bSandboxes(
            stores.e2b,
            sessions,
            catalog,
            settings.e2b,
            delete=services.delete_conversation,
            suspend=services.suspend_conversation,
            hold=leases.hold,
            stop=lambda ctx: services.tiers.pause(ctx, keep_memory=False),
            snapshots=services.snapshots,
            network_rules=stores.network,
        )
        services.ports = SandboxPorts(sessions, provider.inside, settings.ports)
        key = egress_key(settings.egress, stores.deployment)
        services.port_tokens = PortTokens(key)
        services.secrets = OrgSecrets(stores.network, settings.egress, lambda: key)
        if services.secrets.configured:  # else no command pays a read for none
            egress.offer_secrets(secrets_environment(services.secrets, stores.network))
        services.stop_tracing = start_tracing(settings.tracing)
        return services

    def readiness_checks(self) -> dict[str, Callable[[], None]]:
        """What must answer for this instance to be ready, by name (each raises a
        ``SiestaError`` when it does not)."""
        return {"store": self.stores.ping, "provider": self.provider.ping}

    def prepare_ahead(self) -> None:
        """Start making ahead what the next sandboxes will need (a serving instance,
        once; ``close`` stops it)."""
        self.provider.lifecycle.prepare_ahead()
        self.indexer.start()

    def tool_catalog(self, agent: AgentConfig, user: UserInfo, org: str | None = None) -> Catalog:
        """The functions this agent gets for this user (of ``org``: its policies
        apply), with notes on what was left out."""
        notes: list[str] = []
        file_search = self._file_search(agent, org, notes)
        catalog = build_catalog(
            agent,
            user,
            self.settings.tools,
            self.catalog,
            sandbox_enabled=self.settings.sandbox.enabled,
            org_floor=self.org_floor(org, agent.id),
            file_search=file_search,
        )
        catalog.notes.extend(notes)
        return catalog

    def _file_search(self, agent: AgentConfig, org: str | None, notes: list[str]) -> bool:
        """Whether the agent's files call for ``file_search`` (seed 003): ``rag``, when
        it has one; ``direct``, when one overflowed the pre-load budget and the switch
        is on."""
        files = agent.files
        if files is None or org is None:
            return False
        try:
            fitting, count = self.knowledge.preload_plan(org, files.knowledge_base_id)
        except SiestaError as error:
            notes.append(f"file_search is left out: the agent's files cannot be read ({error})")
            return False
        if count == 0:
            notes.append("file_search is left out: the agent has no file (none ready)")
            return False
        if files.strategy == "rag":
            return True
        if len(fitting) == count:
            notes.append(
                "file_search is left out: every file of the agent fits the pre-load budget "
                "(direct strategy: they are in preloadedFiles)"
            )
            return False
        if not files.file_search:
            notes.append(
                f"file_search is off (fileSearch): {count - len(fitting)} of the agent's "
                "files overflowed the pre-load budget and are not in context"
            )
        return files.file_search

    def org_floor(self, org: str | None, agent: str | None) -> dict[str, Policy]:
        """``org``'s floor for a call stating ``agent``: lifted for the agents it trusts
        only once the org has registered them (``AgentRegistry.registered``)."""
        return self.settings.tools.org_floor(org, self.agents.registered(org, agent))

    def _tool_executor(self, gateway: AgentGateway) -> ToolExecutor:
        tools, upstreams = self.settings.tools, self.upstreams
        adapters = {
            **sandbox_adapters(self.sandbox),
            **process_adapters(self.processes),
            **firecrawl_adapters(tools, upstreams),
            **platform_adapters(tools, upstreams),
            **content_adapters(
                ContentReader(self.files, self.settings.files.content, self.knowledge)
            ),
            **memory_adapters(self.memory),
            **knowledge_adapters(self.knowledge),
            "JsExecutorAgent": js_adapter(self.js),
            "run_function_batch": batch_adapter(gateway, self.settings.agents, tools),
            "GoogleSearch.Search": google_search_adapter(tools, upstreams),
            "web_fetch": web_fetch_adapter(tools, upstreams),
            "image_generation": image_adapter(tools, self.files, upstreams),
            "siesta_help_resolve": help_adapter(tools.docs_base_url),
        }
        connections = connection_adapter(tools, upstreams)
        rules = ApprovalRules(tools.approval_ttl_seconds, tools.allow_self_approval)
        return ToolExecutor(
            self.tool_catalog,
            adapters,
            self.stores.executions,
            connections,
            approvals=rules,
            deployment_policies=tools.function_policies,
            org_floor=self.org_floor,
            redeem=self._redeem_grant,
        )

    def _redeem_grant(self, approval_id: str, ttl: float) -> bool:
        """Take an approved door call's grant, once across instances: a claim on a key
        of the approval's own (``door.py``)."""
        key = f"door-grant/{approval_id}"
        claimed = self.stores.idempotency.claim_key(key, "grant", uuid.uuid4().hex, ttl, ttl=ttl)
        return isinstance(claimed, IdempotencyClaim)

    def delete_conversation(self, ctx: CallContext) -> dict[str, Any]:
        """Cancel the conversation's approvals and forget its executions, tear down
        its sandbox, then delete its files and their staging count.

        When an operation holds the conversation past the lease wait, its approvals
        are cancelled at once; the rest is recorded and finished by the next
        reconciliation pass (which forgets what the operation logged meanwhile).
        """
        try:
            with self.leases.hold(ctx.key) as lease:
                record, deleted_files, forgotten = self._teardown(ctx.org, ctx.conversation, lease)
        except SessionBusy:
            self.stores.deletions.mark_deleted(ctx.key)
            self.tools.forget_conversation(ctx.org, ctx.conversation)
            return {"deleted": "pending", "sessionId": None, "deletedFiles": 0}
        return {
            "deleted": record is not None or deleted_files > 0 or forgotten > 0,
            "sessionId": record.session_id if record else None,
            "deletedFiles": deleted_files,
        }

    def suspend_conversation(self, ctx: CallContext) -> bool:
        """Pause the conversation's running sandbox now (memory kept; the next operation
        resumes it). False when it has none running."""
        with self.leases.hold(ctx.key) as lease:
            record = self.stores.sessions.get_session(ctx.org, ctx.conversation)
            if record is None or record.status is not SessionStatus.ACTIVE:
                return False
            return self.lifecycle.pause(record, lease)

    def e2b_tick(self) -> None:
        """The E2B API's background work: sandboxes past their timeout killed (or
        paused on request)."""
        self.e2b.sweep()

    def processes_tick(self) -> None:
        """Upkeep of what runs on in sandboxes: watchers nobody reads stopped, and
        sandboxes running processes kept out of the idle tiers."""
        self.filesystem.sweep()
        now = time.monotonic()
        if now - self._kept_running_at >= self.settings.lifecycle.pause_after_seconds / 3:
            self._kept_running_at = now
            self.processes.keep_running()

    def teardown_conversation(self, key: str, lease: Lease) -> None:
        org, conversation = key.split("/", 1)
        self._teardown(org, conversation, lease)

    def _teardown(
        self, org: str, conversation: str, lease: Lease
    ) -> tuple[SessionRecord | None, int, int]:
        """The session torn down, how many files and executions log entries went."""
        revoke_credentials(self.stores.revocations, self.settings.egress, org, conversation)
        self.network.forget(org, conversation)
        forgotten = self.tools.forget_conversation(org, conversation)  # see admit_approved
        record = self.sessions.teardown(org, conversation, lease)
        deleted_files = self.files.delete_all(org, conversation)
        self.stores.idempotency.forget_conversation(conversation_key(org, conversation))
        self.stores.deletions.clear_deleted(conversation_key(org, conversation))
        # An E2B sandbox is its conversation: deleted through /v1, it is gone for E2B too.
        self.stores.e2b.delete_e2b(org, conversation)
        self.processes.forget(conversation_key(org, conversation))
        return record, deleted_files, forgotten

    def close(self) -> None:
        self.indexer.stop()
        self.js.close()
        self.upstreams.close()
        self.sessions.close()
        self.stores.close()
        self.provider.close()
        self.egress.close()
        if self.stop_tracing is not None:
            self.stop_tracing()


def _knowledge(
    settings: Settings,
    stores: Stores,
    blobs: LocalBlobStore,
    files: ConversationFiles,
    upstreams: Upstreams,
    embedder: Embedder,
) -> tuple[KnowledgeBases, Indexer]:
    """The org's knowledge bases, and the indexer that fills them."""
    knowledge = settings.knowledge
    fetcher = None
    if settings.egress.enabled:  # documents by URL go where sandboxes may go, no further
        client = page_client(settings.tools, upstreams)
        allow = Allowlist.parse(settings.egress.allow)
        fetcher = DocumentFetcher(client, allow, knowledge.fetch_timeout_seconds)
    sources = DocumentSources(files, fetcher, knowledge)
    bases = KnowledgeBases(stores.knowledge, blobs, sources, knowledge, embedder)
    indexing = Indexing(stores.knowledge, blobs, knowledge, embedder)
    return bases, Indexer(indexing, knowledge.indexer_poll_seconds)
