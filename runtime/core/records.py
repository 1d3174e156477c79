"""What the store keeps: session, file, tool-execution, snapshot, agent and memory records.

A session record is the truth about which sandbox serves a conversation. It is
keyed by (org, conversation), so one org can never name another org's session.
Every change to a session record carries the *fence* of the lease its writer
holds (see ``base.py``).

Over 400 lines: one small frozen dataclass per stored record, kept together because
every store (SQLite, Redis) reads and writes the same shapes.
"""

from __future__ import annotations

import base64
import enum
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from siesta_contract.tools import ExecutionStatus


class SessionStatus(enum.StrEnum):
    ACTIVE = "active"
    """The sandbox is meant to be running and counts against capacity."""
    PAUSED = "paused"
    """Idle: processes frozen, memory kept; still counts against capacity."""
    STOPPED = "stopped"
    """Suspended on purpose (processes gone, disk kept); resumed by the next operation."""
    RETIRED = "retired"
    """Idle past the maximum age or failed: sandbox removed; the next operation starts afresh."""
    LOST = "lost"
    """The sandbox vanished underneath us; the next operation starts afresh."""

    @property
    def has_sandbox(self) -> bool:
        return self in (SessionStatus.ACTIVE, SessionStatus.PAUSED, SessionStatus.STOPPED)


@dataclass(frozen=True)
class SessionRecord:
    org: str
    conversation: str
    session_id: str
    sandbox_id: str
    image_id: str
    """The catalog version (``id:tag``) the session was created with; pinned for its
    whole life (records written before versions hold a bare id: its default tag)."""
    image_ref: str
    """The image its sandbox was made from: the build's digest (Docker's image id) when
    the catalog knew it, else the Docker reference."""
    status: SessionStatus
    created_at: float
    last_used_at: float
    generation: int
    """1 for the first sandbox of the conversation, +1 for each replacement."""
    user: str = ""
    """The user whose capacity budget the session counts against."""
    fence: int = 0
    """Fence of the lease holder that wrote this version."""

    @property
    def key(self) -> str:
        return conversation_key(self.org, self.conversation)


def conversation_key(org: str, conversation: str) -> str:
    """One string per conversation; ``/`` cannot occur in ids, so it is unambiguous."""
    return f"{org}/{conversation}"


class FileKind(enum.StrEnum):
    ATTACHMENT = "attachment"
    """Uploaded by the agent backend (the user's files)."""
    ARTIFACT = "artifact"
    """Published from the sandbox, or created by a helper, as a downloadable result."""
    WORKING = "working"
    """Made by a helper for later steps (e.g. ``writeExcelFile``); not a message artifact."""
    KNOWLEDGE = "knowledge"
    """A knowledge base's content version, read by the content tools (never stored as a
    conversation file)."""


@dataclass(frozen=True)
class PoolMember:
    """A ready sandbox (paused, agent started) that no conversation has claimed yet."""

    image_id: str
    sandbox_id: str
    session_id: str
    created_at: float


@dataclass(frozen=True)
class FileRecord:
    """A conversation file; its bytes live in the blob store under ``file_id``."""

    org: str
    conversation: str
    file_id: str
    name: str
    size: int
    content_type: str
    sha256: str
    kind: FileKind
    created_at: float
    editable: bool = False
    """Created for editing (``copyFileAsArtifact``): its content may be replaced."""
    message_id: str | None = None
    """The assistant message the file belongs to, when its maker named one."""

    @property
    def staging_key(self) -> str:
        """What staging counts once per sandbox: this file with these bytes (an
        editable file whose bytes changed counts again)."""
        return f"{self.file_id}:{self.sha256}"


@dataclass(frozen=True)
class StagingCount:
    """The answer of ``FileStore.count_staged``."""

    accepted: bool
    """False: counting the files would pass the limit, so nothing was counted."""
    total: int
    """The conversation's staged bytes after this call (unchanged when refused)."""
    added: int
    """Bytes of the files not counted before (what the call adds, or would add)."""


@dataclass
class ToolExecution:
    id: str
    org: str
    conversation: str
    agent_id: str
    user_id: str
    function: str
    source: str
    arguments: dict[str, Any]
    """Redacted: what the log shows."""
    status: ExecutionStatus
    created_at: float
    result: Any = None
    error: dict[str, Any] | None = None
    duration_ms: int | None = None
    approval: dict[str, Any] | None = None
    """``{"decision": "approved" | "denied" | "expired", "by": person, "token":
    deciding token's name, "at": time}``."""
    pending: dict[str, Any] | None = field(default=None, repr=False)
    """While waiting for approval: the exact request to run once approved."""
    requested_by: str | None = None
    """The name of the token that made the call."""
    expires_at: float | None = None
    """While waiting for approval: when it expires."""
    arguments_deleted: bool = False
    """The call waited for approval, which was decided or expired: its arguments are gone."""

    def expired(self, now: float) -> bool:
        """Still waiting for approval, past its deadline."""
        return (
            self.status is ExecutionStatus.PENDING_APPROVAL
            and self.expires_at is not None
            and self.expires_at <= now
        )

    def settled(self, status: ExecutionStatus, approval: dict[str, Any]) -> ToolExecution:
        """The record once its approval is decided or expired: the request and its
        arguments are deleted; the log keeps the call, its status and who decided."""
        return replace(
            self,
            status=status,
            approval=dict(approval),
            pending=None,
            arguments={},
            arguments_deleted=True,
        )

    def to_json(self) -> str:
        """The whole record as stored (the pending request included)."""
        data = asdict(self)
        data["status"] = self.status.value
        return json.dumps(data, ensure_ascii=False, default=str)

    @classmethod
    def from_json(cls, body: str) -> ToolExecution:
        data = json.loads(body)
        data["status"] = ExecutionStatus(data["status"])
        return cls(**data)

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation,
            "agentId": self.agent_id,
            "userId": self.user_id,
            "function": self.function,
            "source": self.source,
            "arguments": self.arguments,
            "argumentsDeleted": self.arguments_deleted,
            "status": self.status.value,
            "result": self.result,
            "error": self.error,
            "durationMs": self.duration_ms,
            "approval": self.approval,
            "requestedBy": self.requested_by,
            "expiresAt": self.expires_at,
            "createdAt": self.created_at,
        }


@dataclass(frozen=True)
class ExecutionFilter:
    conversation: str | None = None
    agent_id: str | None = None
    function: str | None = None
    status: ExecutionStatus | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 100


@dataclass(frozen=True)
class KeptResponse:
    """The answer an ``Idempotency-Key``'s first request gave, replayed to retries."""

    status: int
    content_type: str
    body: bytes | None
    """``None``: the answer was over the size kept (retries are refused, not run)."""


@dataclass(frozen=True)
class IdempotencyEntry:
    """What a key holds: the request it came with, and its answer once there is one."""

    fingerprint: str
    response: KeptResponse | None
    """``None`` while the first request runs."""


@dataclass(frozen=True)
class IdempotencyClaim:
    """The claimer now runs the key's request."""

    attempt: int
    """1 for the first request with the key; more when this one takes over from a run
    that did not finish: its instance died, or it was handed to a sandbox and failed."""
    dispatched: str | None = None
    """Where an earlier attempt handed its work over (a sandbox id), if it did: the
    taker-over asks there how that run ended instead of running it again."""


@dataclass(frozen=True)
class SealedSecret:
    """One of an org's secrets as the store keeps it: sealed with the operator's key
    (``runtime/egress/sealing.py``); its value is never kept or shown otherwise."""

    org: str
    name: str
    sealed: str
    created_at: float
    updated_at: float
    size: int
    """The value's length in bytes (what a listing may say of it)."""
    hosts: tuple[str, ...]
    """Where the proxy may put it (allowlist entries)."""
    header: str
    """The request header it goes into, in place of its placeholder."""


@dataclass(frozen=True)
class EgressRevocation:
    """A conversation's egress credentials revoked (it was deleted): those issued at or
    before ``revoked_at`` no longer work; a conversation made later with the same id
    gets new ones, which do."""

    org: str
    conversation: str
    revoked_at: float
    """Unix seconds, on the clock of the instance that deleted the conversation."""


@dataclass(frozen=True)
class E2bSandbox:
    """A sandbox made through the E2B API: a conversation (``sandbox_id`` is its id,
    in its token's org) plus what E2B's API shows and promises about it."""

    org: str
    sandbox_id: str
    owner: str
    """The token's name that created it (its user, for capacity)."""
    template: str
    """The catalog image id."""
    access_token: str
    """What envd calls must carry as ``X-Access-Token``."""
    started_at: float
    end_at: float
    """When its timeout passes: then it is killed, or paused (``on_timeout``)."""
    on_timeout: str = "kill"
    """``kill`` or ``pause``."""
    auto_resume: bool = False
    """Whether traffic to one of its ports resumes it when paused (E2B's
    ``lifecycle.auto_resume``; only with ``on_timeout`` ``pause``)."""
    state: str = "running"
    """``running`` or ``paused`` as E2B shows it (a Siesta tier is not a pause)."""
    metadata: dict[str, str] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None
    """The create call's ``Idempotency-Key``: a retry of it gets this sandbox back."""
    public_traffic: bool = True
    """Whether its ports answer without the traffic access token (E2B's
    ``network.allow_public_traffic``, true by default as E2B has it)."""
    mask_request_host: str | None = None
    """The ``Host`` its ports' servers see (``${PORT}``: the port), else ``localhost:PORT``."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> E2bSandbox:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class SnapshotRecord:
    """A snapshot of a conversation's sandbox, in its org: what it was taken of and
    where the provider keeps it (``SnapshotArtifacts``)."""

    org: str
    snapshot_id: str
    owner: str
    """The user who took it."""
    conversation: str
    """The conversation whose sandbox it was taken of."""
    session_id: str
    image_id: str
    """The catalog image the source ran (a sandbox made from the snapshot keeps it)."""
    image: str  # the provider's image a sandbox made from it runs
    workspace: str  # where the provider keeps the workspace's copy
    workspace_bytes: int
    workspace_allocated_bytes: int
    image_bytes: int
    created_at: float
    name: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    layer: str = ""  # the provider's clone of the writable layer (``SnapshotArtifacts``)
    copy_on_write: bool = False  # clones sharing blocks with the source (reflinks)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SnapshotRecord:
        return cls(**json.loads(text))


@dataclass
class AgentRecord:
    """An agent registered in its org (``POST /v1/agents``): its configuration as
    the catalog takes it (``AgentConfig``, JSON), which binds every call that names it
    by ``X-Siesta-Agent``."""

    org: str
    agent_id: str
    config: dict[str, Any]
    updated_at: float
    updated_by: str
    """The token that registered this version."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AgentRecord:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class MemoryBank:
    """An org's memory bank (``siesta_contract.memory``): its entries are apart."""

    org: str
    bank_id: str
    name: str
    description: str
    type: str
    """``conversation`` or ``general``."""
    mode: str
    """``read_write`` or ``read_only``."""
    created_at: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> MemoryBank:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class MemoryEntry:
    """One fact or chat turn of a bank's key, with its text's embedding."""

    org: str
    bank_id: str
    key: str
    entry_id: str
    content: str
    speaker: str | None
    created_at: float
    embedding: str = ""
    """The model that made ``vector`` (``""``: none): a vector of another model is
    never compared with this one's."""
    vector: bytes = b""
    """Little-endian float32, unit length."""

    def to_json(self) -> str:
        body = asdict(self)
        body["vector"] = base64.b64encode(self.vector).decode()
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> MemoryEntry:
        body = json.loads(text)
        return cls(**{**body, "vector": base64.b64decode(body["vector"])})
