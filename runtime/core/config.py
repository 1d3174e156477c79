"""Settings, read from ``SIESTA_*`` environment variables (nested with ``__``).

Built once in the app lifespan or the CLI, never at import time. Every limit
the service enforces is a field here, so operators can see and change it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    IPvAnyAddress,
    IPvAnyNetwork,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]
# A valid Kubernetes label value, so the same id can label pods.
DEPLOYMENT_ID_PATTERN = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$"
TOKEN_NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$"
SHA256_HEX_PATTERN = r"^[0-9a-f]{64}$"
LEGACY_TOKEN_NAME = "api-token"
"""The name ``SIESTA_API_TOKEN`` goes by (in logs and approvals)."""

Scope = Literal["sandbox", "tools", "approve", "admin"]
"""What a token may do: ``sandbox`` the conversation routes (sandbox, files, js,
delete), ``tools`` the tool catalog, execute and executions log, ``approve``
deciding approvals, ``admin`` the operators' routes (``/v1/admin/...``)."""
SCOPES: tuple[Scope, ...] = ("sandbox", "tools", "approve", "admin")


class SandboxSettings(BaseModel):
    """Resources and hardening of every sandbox container."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """When false every sandbox function fails with ``sandbox_disabled``."""
    memory_limit_mb: int = Field(1024, ge=16)
    """Memory (and memory+swap) ceiling of one sandbox."""
    cpu_limit: float = Field(1.0, gt=0)
    """CPUs one sandbox may use (fractions allowed)."""
    pids_limit: int = Field(512, ge=16)
    """Processes/threads one sandbox may have: stops fork bombs."""
    network: str = "none"
    """Docker network of sandboxes; ``none`` means no network at all. Leave it: with
    an egress allowlist (``SIESTA_EGRESS__ALLOW``) the service makes and uses its own
    internal network."""
    extra_labels: dict[str, str] = Field(default_factory=dict)
    """Labels added to everything created, e.g. a deployment name (tests use it)."""
    provision_timeout_seconds: float = Field(60.0, gt=0)
    """How long creating and starting a sandbox may take."""
    workspace_size_mb: int = Field(10240, ge=0)
    """Size of a sandbox's ``/mnt/work`` (Docker: its own ext4 file system; writing
    past it is ``ENOSPC``); 0: no limit (the workspace shares the engine's disk). A
    catalog image may set its own (``workspace_size_mb``)."""
    container_disk_mb: int = Field(10240, ge=0)
    """Size of what a sandbox writes outside ``/mnt/work`` (its writable layer:
    installed packages, ``/tmp``, ``/root``); Docker: a file system of its own under the
    container's overlay folders; 0: no limit."""
    disk_dir: Path = Path("/var/lib/siesta/disks")
    """Docker: sandbox disk images live in ``<this>/<deployment id>``: every instance of
    a deployment must see the same folder, and deployments never see each other's."""


def _entries(value: Any) -> Any:
    """A comma-separated string (handy in env files), a JSON list, or a list."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        return json.loads(value)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _checked_allowlist(entries: list[str]) -> list[str]:
    from runtime.core.network_rules import Allowlist

    Allowlist.parse(entries)  # raises ValueError naming the bad entry
    return entries


# NoDecode: the environment gives the raw text (``a.org,b.org``), not JSON.
HostList = Annotated[
    list[str], NoDecode, BeforeValidator(_entries), AfterValidator(_checked_allowlist)
]


class EgressSettings(BaseModel):
    """The only way out of a sandbox: an HTTP(S) proxy that checks every request.

    Empty ``allow`` (the default) means sandboxes have no network at all. With
    hosts listed, sandboxes join an internal network with no route out, and every
    command gets ``HTTP_PROXY``/``HTTPS_PROXY`` pointing at the proxy.
    """

    model_config = ConfigDict(extra="forbid")

    allow: HostList = Field(default_factory=list)
    """Hosts sandboxes may reach, e.g. ``deb.debian.org,*.pypi.org,files.pythonhosted.org``
    (names only; ``*.suffix`` for names below a domain; ``:port`` for other ports than
    80 and 443). An agent may narrow this list, never widen it."""
    proxy_port: int = Field(3128, ge=1, le=65535)
    """Docker: the port the proxy listens on, on the sandbox network's gateway."""
    proxy_url: str | None = None
    """An egress proxy run apart from the service (Kubernetes: the siesta-egress
    Service). The service starts none; its host name is resolved here once, so
    sandboxes need no DNS."""
    key: SecretStr | None = Field(None, min_length=32)
    """Signs sandboxes' proxy credentials; a separately run proxy needs the same one.
    Default: made once and kept in the store."""
    hosts: dict[str, IPvAnyAddress] = Field(default_factory=dict)
    """Names the proxy answers without DNS (like /etc/hosts), still checked like any
    address, e.g. ``{"mirror.internal": "10.1.2.3"}``."""
    allowed_private_networks: list[IPvAnyNetwork] = Field(default_factory=list)
    """Private ranges the proxy may connect to (an internal mirror); the loopback and
    metadata addresses stay refused unless listed (metadata: always)."""
    connect_timeout_seconds: float = Field(10.0, gt=0)
    idle_timeout_seconds: float = Field(300.0, gt=0)
    """A proxied connection with no traffic either way for this long is closed."""
    max_connections: int = Field(256, ge=1)
    """Connections one proxy carries at once; more are answered 503."""
    max_connections_per_conversation: int = Field(64, ge=1)
    """Connections one sandbox may have open through one proxy (503 past it), so that
    no sandbox takes the proxy from the others."""
    revocation_retention_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    """Deleting a conversation revokes its credentials; the revocation is kept this
    long (in the store and in each proxy). Credentials older than this are refused
    (``credentials_expired``), so a revocation can go once nothing it revokes could
    still be accepted. Each command gets fresh credentials: only a process that
    outlives the command that started it by more than this loses egress."""
    revocation_poll_seconds: float = Field(5.0, gt=0)
    """How often each proxy reads new revocations from the store: a deleted
    conversation's credentials stop working within this."""

    @property
    def enabled(self) -> bool:
        return bool(self.allow)


class CommandSettings(BaseModel):
    """Limits of ``runCommand``."""

    model_config = ConfigDict(extra="forbid")

    default_timeout_seconds: int = Field(60, ge=1)
    """Wall-clock timeout when the caller gives none."""
    max_timeout_seconds: int = Field(600, ge=1)
    """Upper bound of a caller's ``timeoutSeconds`` (larger values are capped)."""
    max_output_bytes: int = Field(64 * 1024, ge=1024, le=500 * 1024)
    """Bytes kept per stream (stdout, stderr); the rest is dropped from the middle. At
    most 500 KiB: the sandbox agent returns both streams in one frame of at most 1 MiB."""
    max_command_bytes: int = Field(64 * 1024, ge=16)
    """Longest accepted command text, in UTF-8 bytes."""
    kill_grace_seconds: int = Field(2, ge=1)
    """After the timeout's SIGTERM, how long before SIGKILL."""


class ContentSettings(BaseModel):
    """Caps of the ``content`` tools (conversation files read in pieces)."""

    model_config = ConfigDict(extra="forbid")

    max_peek_chars: int = Field(20_000, ge=1)
    """Most characters one ``peek_content`` returns (a larger range is cut)."""
    max_peek_lines: int = Field(500, ge=1)
    """Most lines one ``peek_content`` in lines returns."""
    max_line_chars: int = Field(2_000, ge=16)
    """Longest line ``grep_content`` returns whole; longer lines are cut."""
    max_grep_matches: int = Field(100, ge=1)
    """Most matches one ``grep_content`` returns (a caller's ``maxMatches`` is capped)."""
    max_context_lines: int = Field(10, ge=0)
    """Most context lines before and after each match."""
    max_pattern_chars: int = Field(500, ge=1)
    """Longest ``grep_content`` query."""
    max_scan_chars: int = Field(100_000_000, ge=1)
    """Most characters one ``grep_content`` searches (from its ``startLine``) and
    ``get_content_stats`` counts; past it the result says where to go on."""
    max_list_sources: int = Field(200, ge=1)
    """Most files ``list_content_sources`` returns."""


class FileSettings(BaseModel):
    """Limits of the file functions, uploads and staging."""

    model_config = ConfigDict(extra="forbid")

    max_upload_bytes: int = Field(100 * 1024 * 1024, ge=1)
    """Largest attachment the backend may upload."""
    max_write_bytes: int = Field(1024 * 1024, ge=1)
    """Largest ``writeFile`` content (UTF-8 bytes); larger content is made by a command."""
    max_read_bytes: int = Field(1024 * 1024, ge=1)
    """Most bytes ``readFile`` returns (a caller's ``maxBytes`` is capped by it)."""
    max_list_entries: int = Field(1000, ge=1)
    """Most entries ``listFiles`` returns."""
    max_publish_bytes: int = Field(100 * 1024 * 1024, ge=1)
    """Largest file ``publishFiles`` turns into an artifact."""
    max_publish_paths: int = Field(50, ge=1)
    """Most paths in one ``publishFiles`` call."""
    max_stage_file_bytes: int = Field(100 * 1024 * 1024, ge=1)
    """Largest single file ``runCommand(files=...)`` stages."""
    max_stage_total_bytes: int = Field(250 * 1024 * 1024, ge=1)
    """Most bytes one ``runCommand`` call stages into its conversation's sandbox."""
    max_stage_files: int = Field(50, ge=1)
    """Most files one ``runCommand`` call stages."""
    max_path_bytes: int = Field(1024, ge=16)
    """Longest workspace path accepted."""
    max_staged_bytes_per_conversation: int = Field(1024 * 1024 * 1024, ge=1)
    """Most bytes staged into one conversation's sandbox over all its calls (counted in
    the store, so across instances). A file staged again unchanged counts once; the
    count starts again when the sandbox is replaced or the conversation deleted."""
    content: ContentSettings = Field(default_factory=lambda: ContentSettings())
    """Caps of the ``content`` System Tool (``SIESTA_FILES__CONTENT__*``)."""


class SqliteStoreSettings(BaseModel):
    """The embedded store: one SQLite file, one service instance."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["sqlite"] = "sqlite"
    path: Path | None = None
    """The database file; default ``DATA_DIR/siesta.db``."""


class RedisStoreSettings(BaseModel):
    """The shared store of several service instances."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["redis"] = "redis"
    url: str = Field(pattern=r"^(redis|rediss|unix)://")
    """``redis://host:port/db``, ``rediss://`` (TLS) or ``unix:///path.sock``."""


StoreSettings = Annotated[SqliteStoreSettings | RedisStoreSettings, Field(discriminator="type")]


def _store_from_url(value: Any) -> Any:
    """``SIESTA_STORE__URL`` alone (the short form) picks the store by its scheme:
    ``sqlite:///path`` or ``redis://...``; anything else is refused here, at start-up."""
    if not isinstance(value, dict) or "type" in value or "url" not in value:
        return value
    url = str(value["url"])
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = url.removeprefix("sqlite://")
        if not path:
            msg = f"SIESTA_STORE__URL {url!r} names no database file"
            raise ValueError(msg)
        return {"type": "sqlite", "path": path, **_without(value, "url")}
    if scheme in ("redis", "rediss", "unix"):
        return {"type": "redis", **value}
    msg = f"SIESTA_STORE__URL scheme {scheme!r} is not supported (use sqlite:// or redis://)"
    raise ValueError(msg)


class LeaseSettings(BaseModel):
    """The per-conversation lease that serialises sandbox operations."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: float = Field(15.0, gt=0)
    """A holder that stops renewing loses the lease after this long."""
    wait_seconds: float = Field(30.0, ge=0)
    """How long a call waits for a busy conversation before ``session_busy``."""


class IdempotencySettings(BaseModel):
    """Safe retries: what the ``Idempotency-Key`` header keeps, and for how long."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: float = Field(24 * 3600.0, gt=0)
    """How long a key's answer is kept; a retry after it runs the request again."""
    wait_seconds: float = Field(30.0, ge=0)
    """How long a retry waits for the key's first request to finish before
    ``session_busy``."""
    hold_seconds: float = Field(30.0, gt=0)
    """A running request renews its claim on the key; when its instance dies the claim
    lapses after this long and a retry takes it over: a command is then collected
    from its sandbox, never started again (see "Safe retries" in the README)."""
    max_response_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest answer kept; a larger one is not (``Idempotency-Kept: false``), and a
    retry with its key gets ``idempotency_result_not_kept`` instead of a second run."""


class CapacitySettings(BaseModel):
    """Limits on active (running) sandboxes."""

    model_config = ConfigDict(extra="forbid")

    max_active_per_org: int = Field(50, ge=1)
    max_active_per_user: int = Field(10, ge=1)
    max_active_per_host: int = Field(100, ge=1)
    host_id: str = Field(default_factory=socket.gethostname)
    """Which host's budget this instance's sandboxes count against (its Docker engine)."""


class LifecycleSettings(BaseModel):
    """Idle tiers. Idle time counts from the end of a session's last operation."""

    model_config = ConfigDict(extra="forbid")

    pause_after_seconds: float = Field(300.0, gt=0)
    """Idle this long: processes frozen, memory kept (resumes in milliseconds)."""
    stop_after_seconds: float = Field(1800.0, gt=0)
    """Idle this long: processes ended, memory freed, disk and packages kept."""
    retire_after_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    """Idle this long: container and workspace removed; the next operation starts afresh."""
    resume_timeout_seconds: float = Field(30.0, gt=0)
    """A resume that takes longer fails with ``resume_timeout``."""


class ReconcileSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    orphan_grace_seconds: float = Field(300.0, ge=0)
    """Labelled containers/volumes without a session are removed only when older than this."""
    background: bool | None = None
    """Run passes inside the service; default: on with SQLite, off with Redis (use the CronJob)."""
    interval_seconds: float = Field(60.0, gt=0)
    """Time between background passes."""


class PoolSettings(BaseModel):
    """The warm pool: ready sandboxes per enabled catalog image."""

    model_config = ConfigDict(extra="forbid")

    size: int = Field(2, ge=0)
    """Ready sandboxes kept per enabled image (paused, agent started); 0 disables the pool."""
    max_total: int = Field(8, ge=0)
    """Ready sandboxes in all, whatever the number of images."""
    refill_interval_seconds: float = Field(2.0, gt=0)
    """Time between refills (run by every service instance; the store keeps counts exact)."""
    refill_per_pass: int = Field(1, ge=1)
    """Members made per image per refill: the refill rate."""


class JsSettings(BaseModel):
    """The JavaScript executor's pool and limits."""

    model_config = ConfigDict(extra="forbid")

    pool_size: int = Field(2, ge=1)
    """Pre-started worker processes waiting for a script."""
    worker_start: Literal["fork", "exec"] = "fork"
    """``fork``: workers are forks of a template process that has V8 loaded (a few ms
    each); ``exec``: each worker starts its own interpreter (slower; no template)."""
    timeout_seconds: float = Field(30.0, gt=0)
    """Wall-clock limit of one script, helper calls included."""
    memory_limit_mb: int = Field(512, ge=64)
    """Resident memory one worker may reach before it is killed."""
    max_result_bytes: int = Field(256 * 1024, ge=16)
    """The result string is cut at this many bytes (and says so)."""
    max_log_entries: int = Field(1000, ge=1)
    """``log`` calls kept; later ones are counted, not kept."""
    max_log_entry_bytes: int = Field(8 * 1024, ge=16)
    """One log or status message is cut at this many bytes."""
    max_log_total_bytes: int = Field(256 * 1024, ge=16)
    """All log messages of one script together."""
    max_status_entries: int = Field(200, ge=1)
    """``logStatus`` calls kept (and streamed); later ones are counted, not kept."""
    max_status_total_bytes: int = Field(64 * 1024, ge=16)
    """All status messages of one script together."""
    max_code_bytes: int = Field(256 * 1024, ge=16)
    """Longest script accepted."""
    acquire_timeout_seconds: float = Field(30.0, gt=0)
    """How long a script waits for a free worker."""
    worker_start_timeout_seconds: float = Field(30.0, gt=0)
    max_excel_rows: int = Field(200_000, ge=1)
    """Most rows a spreadsheet helper reads or writes in one call."""


class SubAgent(BaseModel):
    """A sub-agent for the standalone (OpenAI-compatible) gateway."""

    model_config = ConfigDict(extra="forbid")

    name: str
    model: str
    system_prompt: str = ""
    base_url: str
    api_key: SecretStr | None = None


class NoGatewaySettings(BaseModel):
    """No sub-agents: ``callAgent`` fails with a message that says so."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["none"] = "none"


class HttpGatewaySettings(BaseModel):
    """The agent backend runs sub-agents (it owns agents, models and credentials)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["http"] = "http"
    backend_url: str = Field(pattern=r"^https?://")
    """The backend's endpoint for sub-agent calls (required)."""
    backend_token: SecretStr | None = None


class OpenAIGatewaySettings(BaseModel):
    """Sub-agents defined here, reached through OpenAI-compatible chat completions."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["openai"] = "openai"
    agents: list[SubAgent] = Field(min_length=1)
    """The sub-agents (required, at least one)."""


GatewaySettings = Annotated[
    NoGatewaySettings | HttpGatewaySettings | OpenAIGatewaySettings,
    Field(discriminator="type"),
]
_GATEWAY_FIELDS = ("backend_url", "backend_token", "agents")


class AgentSettings(BaseModel):
    """How ``callAgent`` reaches sub-agents."""

    model_config = ConfigDict(extra="forbid")

    gateway: GatewaySettings = Field(default_factory=NoGatewaySettings)
    """``SIESTA_AGENTS__GATEWAY__TYPE``: ``none``, ``http`` (the agent backend) or
    ``openai`` (chat completions), with that gateway's own settings beside it."""
    timeout_seconds: float = Field(120.0, gt=0)
    """Longest one sub-agent call may take (also bounded by the script's deadline)."""
    max_parallel: int = Field(8, ge=1)
    """Concurrent calls of one ``callAgentsParallel``."""

    @model_validator(mode="before")
    @classmethod
    def _flat_gateway(cls, data: Any) -> Any:
        """The short form ``SIESTA_AGENTS__GATEWAY=http`` with ``SIESTA_AGENTS__BACKEND_URL``
        (and ``__BACKEND_TOKEN`` / ``__AGENTS``) beside it means the nested one."""
        if not isinstance(data, dict) or not isinstance(data.get("gateway"), str):
            return data
        gateway = {"type": data["gateway"]}
        gateway.update({k: data[k] for k in _GATEWAY_FIELDS if k in data})
        return {**_without(data, "gateway", *_GATEWAY_FIELDS), "gateway": gateway}


class ToolSettings(BaseModel):
    """The tool-catalog layer."""

    model_config = ConfigDict(extra="forbid")

    system_connection_ids: dict[str, str] = Field(
        default_factory=lambda: {
            "google_search": "system-google-search",
            "web_scraper": "system-firecrawl",
        }
    )
    """The system-owned connection each connection-backed System Tool must reference."""
    max_batch_parallel: int = Field(40, ge=1)
    """``run_function_batch`` calls running at once (the reference's 40)."""
    max_batch_inputs: int = Field(1000, ge=1)
    """Inputs one ``run_function_batch`` call accepts."""
    http_timeout_seconds: float = Field(20.0, gt=0)
    """One request of an adapter to an external API."""
    fetch_max_bytes: int = Field(2 * 1024 * 1024, ge=1024)
    """Most bytes read from one fetched web page."""
    context_chars: int = Field(1500, ge=100)
    """Page text kept per search result / fetched page."""
    allow_private_networks: bool = False
    """Let web_fetch and search-result fetching reach loopback and private addresses
    (off: a model must not be able to probe the service's own network)."""
    google_base_url: str = "https://www.googleapis.com"
    google_api_key: SecretStr | None = None
    google_cx: str | None = None
    """The Custom Search engine id."""
    firecrawl_base_url: str = "https://api.firecrawl.dev"
    firecrawl_api_key: SecretStr | None = None
    crawl_timeout_seconds: float = Field(120.0, gt=0)
    crawl_poll_seconds: float = Field(2.0, gt=0)
    openai_base_url: str = "https://api.openai.com"
    openai_api_key: SecretStr | None = None
    image_model: str = "gpt-image-2"
    platform_base_url: str | None = None
    """The Siesta platform API that Platform_* functions are forwarded to."""
    platform_token: SecretStr | None = None
    platform_app_url: str | None = None
    """The Siesta app people open (``https://app.example.com``): Platform_CreateTask's
    "Open task" button links to ``{platform_app_url}/tasks/{taskId}``; unset, the
    link is the app-relative ``/tasks/{taskId}``."""
    connections_url: str | None = None
    """Where connection functions (Gmail.Send, ...) are executed (the agent backend)."""
    connections_token: SecretStr | None = None
    approval_ttl_seconds: float = Field(3600.0, gt=0)
    """A call waiting for approval expires after this long: deciding it then answers
    ``approval_expired`` and the log shows it ``expired``."""
    allow_self_approval: bool = False
    """Let the token that asked for a call also decide it (off: a second caller, with
    the ``approve`` scope, must decide; single-token development setups turn it on)."""
    executions_retention_days: int = Field(30, ge=1)
    """Executions log entries older than this are removed by the reconciliation pass."""
    function_policies: dict[str, Literal["enabled", "disabled", "confirm"]] = Field(
        default_factory=dict
    )
    """The deployment's policy per function name, e.g. ``{"runCommand": "confirm"}``:
    used when an agent's configuration says nothing, and a floor it cannot go below
    (it holds on the direct sandbox and JS routes too). Functions nobody configured
    follow the reference: create/update/delete/send/publish actions ask first."""
    search_deadline_seconds: float = Field(20.0, gt=0)
    """One ``GoogleSearch.Search`` call from start to answer: the search request and
    the fetches of its result pages together; pages not read by then get no context."""
    search_parallel_fetches: int = Field(5, ge=1)
    """Result pages one ``GoogleSearch.Search`` call fetches at once."""
    batch_deadline_seconds: float = Field(300.0, gt=0)
    """One ``run_function_batch`` call, all its inputs together: calls not finished by
    then are reported as failed, and the batch answers. Each call is also held to
    ``SIESTA_AGENTS__TIMEOUT_SECONDS``."""


class TokenSettings(BaseModel):
    """One caller's bearer token, kept as the SHA-256 digest of the token
    (``siesta-runtime tokens hash``), never the token itself."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOKEN_NAME_PATTERN)
    """Who the caller is, in logs and in approvals (``backend``, ``approver-ui``)."""
    sha256: Annotated[str, BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v)] = (
        Field(pattern=SHA256_HEX_PATTERN)
    )
    """Hex SHA-256 of the token's UTF-8 bytes."""
    scopes: list[Scope] = Field(min_length=1)


class DockerProviderSettings(BaseModel):
    """Sandboxes as containers of one Docker engine."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["docker"] = "docker"
    base_url: str | None = None
    """Docker engine address; default is the environment (DOCKER_HOST or the socket)."""


class FakeProviderSettings(BaseModel):
    """Sandboxes as folders on the host, commands run on the host: tests only."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["fake"] = "fake"


class KubernetesProviderSettings(BaseModel):
    """Sandboxes as pods of a Kubernetes cluster, workspaces as PersistentVolumeClaims."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["kubernetes"] = "kubernetes"
    namespace: str = Field("default", pattern=DNS_LABEL_PATTERN)
    """Where sandbox pods and their claims are made (the service's own namespace in
    the manifests; the Role grants exactly that)."""
    api_url: str | None = None
    """An API server to use without credentials (``kubectl proxy``, a test double).
    Default: the in-cluster service account, else the kubeconfig."""
    kubeconfig: Path | None = None
    """A kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``) when not in a cluster."""
    context: str | None = None
    """The kubeconfig context (default: its current one)."""
    runtime_class: str | None = None
    """RuntimeClass of sandbox pods, e.g. ``gvisor`` (k8s/examples/runtimeclass-gvisor.yaml)."""
    storage_class: str | None = None
    """StorageClass of workspace claims (default: the cluster's default class)."""
    workspace_size: str = Field("1Gi", pattern=QUANTITY_PATTERN)
    """Requested size of a workspace claim."""
    run_as_user: int | None = Field(None, ge=1)
    """Run the sandbox as this non-root uid, for images that allow it (the catalog's
    images install packages as root with a few capabilities, like on Docker)."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Nodes sandbox pods may run on (e.g. a sandbox node pool)."""
    request_timeout_seconds: float = Field(30.0, gt=0)
    """How long one API request may take."""


ProviderSettings = Annotated[
    DockerProviderSettings | KubernetesProviderSettings | FakeProviderSettings,
    Field(discriminator="type"),
]


class ImageSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    catalog_path: Path = REPO_ROOT / "images" / "catalog.yaml"
    """The operators' catalog of base images."""


class HttpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """Address ``serve`` listens on (``--host`` overrides it); the service image uses 0.0.0.0."""
    port: int = Field(8080, ge=1, le=65535)
    """Port ``serve`` listens on (``--port`` overrides it)."""
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    """Largest JSON request body accepted (uploads have their own limit)."""
    worker_threads: int = Field(64, ge=4)
    """Sandbox calls that can run at once in one process (each holds a thread)."""
    sse_keepalive_seconds: float = Field(15.0, gt=0)
    """A streamed answer that has sent nothing for this long sends an SSE comment
    (``: keepalive``), so that proxies with an idle timeout (nginx: 60 s) keep it open
    while a command is silent."""


class TracingSettings(BaseModel):
    """Where spans go. The W3C trace context a caller sends is passed on to upstream
    APIs and the agent gateway whatever is chosen here."""

    model_config = ConfigDict(extra="forbid")

    exporter: Literal["none", "otlp", "console"] = "none"
    """``none``: nothing is recorded; ``otlp``: OTLP over HTTP (needs the ``otlp``
    extra: ``pip install 'siesta-runtime[otlp]'``); ``console``: JSON on stdout."""
    otlp_endpoint: str | None = None
    """The collector's traces URL (``http://collector:4318/v1/traces``); default:
    the exporter's own (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or localhost)."""
    service_name: str = "siesta-runtime"
    """``service.name`` of every span."""
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0)
    """Share of new traces recorded; a caller's sampling decision is always followed."""


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
    files: FileSettings = Field(default_factory=FileSettings)
    store: Annotated[StoreSettings, BeforeValidator(_store_from_url)] = Field(
        default_factory=SqliteStoreSettings
    )
    lease: LeaseSettings = Field(default_factory=LeaseSettings)
    idempotency: IdempotencySettings = Field(default_factory=IdempotencySettings)
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    js: JsSettings = Field(default_factory=JsSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    provider: ProviderSettings = Field(default_factory=DockerProviderSettings)
    images: ImageSettings = Field(default_factory=ImageSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
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

    @property
    def sqlite_path(self) -> Path:
        """The SQLite store's file (when the store is SQLite)."""
        store = self.store
        path = store.path if isinstance(store, SqliteStoreSettings) else None
        return path or self.data_dir / "siesta.db"


def _without(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names}


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
