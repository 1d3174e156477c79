"""Settings, read from ``SIESTA_*`` environment variables (nested with ``__``):
each area's settings live beside what they configure and are assembled here.

Built once in the app lifespan or the CLI, never at import time. Every limit
the service enforces is a field, so operators can see and change it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runtime.admin.settings import AuditSettings
from runtime.agents.settings import AgentSettings
from runtime.core.settings import (
    DEPLOYMENT_ID_PATTERN,
    LEGACY_TOKEN_NAME,
    ConsoleSettings,
    HttpSettings,
    IdempotencySettings,
    TokenSettings,
    TracingSettings,
)
from runtime.e2b.settings import E2bSettings
from runtime.egress.settings import EgressSettings
from runtime.files.settings import FileSettings
from runtime.images.settings import ImageSettings
from runtime.jsexec.settings import JsSettings
from runtime.knowledge.settings import KnowledgeSettings
from runtime.memory.settings import MemorySettings
from runtime.sandbox.ports.settings import PortsSettings
from runtime.sandbox.settings import CommandSettings, MetricsSettings, ProcessSettings
from runtime.sandbox.snapshots.settings import SnapshotSettings
from runtime.seams.provider_settings import (
    DockerProviderSettings,
    ProviderSettings,
    SandboxSettings,
)
from runtime.seams.store_settings import SqliteStoreSettings, StoreSettings, _store_from_url
from runtime.sessions.settings import (
    CapacitySettings,
    LeaseSettings,
    LifecycleSettings,
    PoolSettings,
    ProvisionSettings,
    ReconcileSettings,
)
from runtime.tools.settings import ToolSettings

DRAIN_MARGIN_SECONDS = 5
"""Beyond a command's longest run and its kill grace: time for its answer to be sent."""


def under(host: str, domain: str) -> bool:
    """Whether ``host`` is ``domain`` or a name under it (DNS names: any case)."""
    host, domain = host.lower().rstrip("."), domain.lower().rstrip(".")
    return host == domain or host.endswith("." + domain)


class Settings(BaseSettings):
    """Everything configurable."""

    model_config = SettingsConfigDict(
        env_prefix="SIESTA_", env_nested_delimiter="__", extra="forbid"
    )

    api_token: SecretStr | None = Field(None, min_length=16)
    """Bearer token the agent backend presents (service-to-service), with every scope;
    named ``api-token``. ``serve`` refuses to start without it or ``tokens``; other
    commands do not need either."""
    tokens: list[TokenSettings] = Field(default_factory=list)
    """Scoped tokens, as JSON: ``[{"name", "sha256", "scopes"}, ...]``."""
    data_dir: Path = Path(".siesta")
    """Embedded state (SQLite) and files."""
    deployment_id: str | None = Field(None, pattern=DEPLOYMENT_ID_PATTERN)
    """Labels everything this deployment creates; reconciliation and clean-up touch
    only what carries it. Default: a random id made once and kept in the store, so
    instances sharing a store are one deployment and two deployments sharing one
    engine never reconcile each other's sandboxes."""
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    egress: EgressSettings = Field(default_factory=EgressSettings)
    command: CommandSettings = Field(default_factory=CommandSettings)
    processes: ProcessSettings = Field(default_factory=ProcessSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    ports: PortsSettings = Field(default_factory=PortsSettings)
    files: FileSettings = Field(default_factory=FileSettings)
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    store: Annotated[StoreSettings, BeforeValidator(_store_from_url)] = Field(
        default_factory=SqliteStoreSettings
    )
    lease: LeaseSettings = Field(default_factory=LeaseSettings)
    idempotency: IdempotencySettings = Field(default_factory=IdempotencySettings)
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    provision: ProvisionSettings = Field(default_factory=ProvisionSettings)
    js: JsSettings = Field(default_factory=JsSettings)
    e2b: E2bSettings = Field(default_factory=E2bSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    provider: ProviderSettings = Field(default_factory=DockerProviderSettings)
    images: ImageSettings = Field(default_factory=ImageSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    debug: bool = False
    """Log at debug level."""

    @model_validator(mode="after")
    def _egress_owns_the_network(self) -> Settings:
        if self.egress.enabled and self.sandbox.network != "none":
            msg = (
                "SIESTA_SANDBOX__NETWORK must stay 'none' with an egress allowlist: "
                "the service puts sandboxes on its own internal network"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _credentials_outlive_commands(self) -> Settings:
        if self.egress.revocation_retention_seconds <= self.command.max_timeout_seconds:
            msg = (
                "SIESTA_EGRESS__REVOCATION_RETENTION_SECONDS must be longer than "
                "SIESTA_COMMAND__MAX_TIMEOUT_SECONDS: a command's proxy credentials "
                "would expire while it runs"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _distinct_tokens(self) -> Settings:
        names = [token.name for token in self.tokens]
        if self.api_token is not None:
            names.append(LEGACY_TOKEN_NAME)
        digests = [token.sha256 for token in self.tokens]
        for what, values in (("name", names), ("sha256", digests)):
            repeated = sorted({value for value in values if values.count(value) > 1})
            if repeated:
                msg = f"each token needs its own {what}; repeated: {', '.join(repeated)}"
                raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _previews_apart(self) -> Settings:
        preview, console = self.ports.preview_domain, self.console.host
        if preview is None:
            return self
        if preview.lower() == (self.e2b.ports_domain or "").lower():
            msg = "SIESTA_PORTS__PREVIEW_DOMAIN must differ from SIESTA_E2B__PORTS_DOMAIN"
            raise ValueError(msg)
        if console is not None and under(console, preview):
            msg = (
                f"SIESTA_CONSOLE__HOST ({console}) must not be the preview domain or a name "
                f"under it ({preview}): a preview would share the console's site"
            )
            raise ValueError(msg)
        return self

    @property
    def drain_seconds(self) -> float:
        """How long ``serve`` drains after SIGTERM (``SIESTA_HTTP__DRAIN_SECONDS``, else
        derived from the longest command timeout)."""
        if self.http.drain_seconds is not None:
            return self.http.drain_seconds
        command = self.command
        return command.max_timeout_seconds + command.kill_grace_seconds + DRAIN_MARGIN_SECONDS

    @property
    def background_reconcile(self) -> bool:
        """Whether a serving instance runs reconciliation itself: as configured, else
        only on SQLite (one instance: nobody else runs the CronJob)."""
        if self.reconcile.background is not None:
            return self.reconcile.background
        return isinstance(self.store, SqliteStoreSettings)

    @property
    def sqlite_path(self) -> Path:
        """The SQLite store's file (when the store is SQLite)."""
        store = self.store
        path = store.path if isinstance(store, SqliteStoreSettings) else None
        return path or self.data_dir / "siesta.db"


_UNION_FIELDS = {"store", "provider", "gateway"}


def describe_invalid_settings(error: ValidationError) -> str:
    """One line per problem, naming the environment variable to set or fix
    (``SIESTA_AGENTS__GATEWAY__BACKEND_URL: Field required``)."""
    lines = []
    for problem in error.errors():
        parts: list[str] = []
        for part in problem["loc"]:
            if parts and parts[-1] in _UNION_FIELDS and part in _UNION_TAGS:
                continue  # the chosen variant's tag, not a setting of its own
            parts.append(str(part))
        name = "SIESTA_" + "__".join(parts).upper() if parts else "SIESTA_*"
        lines.append(f"{name}: {problem['msg']}")
    return "\n".join(lines)


_UNION_TAGS = {"sqlite", "redis", "docker", "kubernetes", "fake", "none", "http", "openai"}
