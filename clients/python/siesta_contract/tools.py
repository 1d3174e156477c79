"""The tool layer's bodies and answers: catalog, execute, approvals, executions log."""

from __future__ import annotations

import enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from siesta_contract.agents import AgentConfig, Policy, Role, SystemToolId, UserInfo
from siesta_contract.errors import ErrorBody
from siesta_contract.functions.knowledge import PreloadedFile
from siesta_contract.text import ID_MAX_CHARS, ID_PATTERN

SchemaMode = Literal["standard", "strict"]
"""How the catalog writes each function's parameters: as the service publishes them, or
in the strict form of function calling (every property required, optionals nullable)."""


class CatalogRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: AgentConfig
    user: UserInfo
    org: str = Field(
        description="The agent's organization: its own policies (SIESTA_TOOLS__ORG_POLICIES) "
        "apply, as they do when the agent's calls run (a token bound to an org may name "
        "only its own)",
        json_schema_extra={"pattern": ID_PATTERN, "maxLength": ID_MAX_CHARS},
    )


class CatalogFunctionPublic(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments (OpenAI function-calling form)."""
    group: Literal["System", "Shared", "Private"]
    source: str
    """``system:<tool id>`` or ``connection:<id>``."""
    policy: Policy
    policyReason: str
    """Why this policy holds: the agent's configuration, the deployment's policy, or
    the default (with the rule: e.g. "the name says it is a send action")."""


class CatalogPublic(BaseModel):
    functions: list[CatalogFunctionPublic]
    notes: list[str]
    """What was left out, and why."""
    preloadedFiles: list[PreloadedFile] = Field(default_factory=list)
    """The agent's files to put into the model's context (``files.strategy``
    ``direct``): smallest first, as many as fit the budget
    (``SIESTA_KNOWLEDGE__DIRECT_PRELOAD_CHARS``)."""


class ExecuteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversationId: str = Field(
        json_schema_extra={"pattern": ID_PATTERN, "maxLength": ID_MAX_CHARS}
    )
    agent: AgentConfig
    user: UserInfo
    function: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    messageId: str | None = Field(
        None,
        description="The assistant message the call belongs to: the files it publishes "
        "are attached to it (the backend's id; never the model's)",
        json_schema_extra={"pattern": ID_PATTERN, "maxLength": ID_MAX_CHARS},
    )


class ExecutionStatus(enum.StrEnum):
    PENDING_APPROVAL = "pending_approval"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DENIED = "denied"
    EXPIRED = "expired"
    """Waited for approval past its deadline; never runs."""


class ExecutionOutcome(BaseModel):
    """Tool-style: ``ok`` with ``result``, or not ``ok`` with ``error`` (the model reads it)."""

    ok: bool
    executionId: str
    status: ExecutionStatus
    result: Any = None
    error: ErrorBody | None = None


class ExecutionPublic(BaseModel):
    id: str
    conversationId: str
    agentId: str
    userId: str
    function: str
    source: str
    arguments: dict[str, Any]
    """Redacted: values of secret-looking keys are replaced. Empty once an approval
    was decided or expired (``argumentsDeleted``)."""
    argumentsDeleted: bool
    status: ExecutionStatus
    result: Any
    error: dict[str, Any] | None
    durationMs: int | None
    approval: dict[str, Any] | None
    """``{"decision": "approved" | "denied" | "expired", "by", "token", "at"}``."""
    requestedBy: str | None
    """The name of the token that made the call."""
    expiresAt: float | None
    """When a call waiting for approval expires."""
    createdAt: float


class ExecutionsPublic(BaseModel):
    executions: list[ExecutionPublic]


class WriteFileSummary(BaseModel):
    """What a ``writeFile`` waiting for approval would write."""

    path: str
    sizeBytes: int
    """The content's size in UTF-8 bytes."""
    head: str
    """The content's beginning (at most ``headChars`` characters)."""
    headChars: int


class ApprovalPublic(BaseModel):
    """A call waiting for a person's decision: everything that person needs to decide."""

    approvalId: str
    function: str
    source: str
    """``system:<tool id>`` or ``connection:<id>``."""
    conversationId: str
    agentId: str
    userId: str
    """The conversation's user the call acts for."""
    requestedBy: str | None
    """The name of the token that made the call."""
    requestedAt: float
    expiresAt: float
    policy: Literal["confirm"]
    policyReason: str
    """Which rule asked for the approval (as the catalog's ``policyReason``)."""
    arguments: dict[str, Any]
    """The arguments that run once approved: complete on ``GET .../approvals/{id}``
    (only the values of secret-looking keys masked, named in ``maskedKeys``); in a
    list, texts longer than 4,096 characters are cut, saying how long they are."""
    argumentsComplete: bool
    """Whether ``arguments`` is all of them (false in a list where a text was cut)."""
    argumentsBytes: int
    """The size of the complete arguments, as JSON."""
    maskedKeys: list[str]
    """Paths (``a.b``) whose values are masked because their key names a secret."""
    writeFile: WriteFileSummary | None = None
    """For ``writeFile``: the path, the size and the head of what it writes."""


class ApprovalsPublic(BaseModel):
    approvals: list[ApprovalPublic]


class Decision(BaseModel):
    """A person's decision on a call that waits for approval."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    by: str = Field(min_length=1)
    """The person who decided (recorded with the execution)."""


class SystemToolPublic(BaseModel):
    id: SystemToolId
    name: str
    functions: list[str]
    available: bool
    """Whether this deployment can run it (what depends on the agent is ``requires``)."""
    reason: str | None
    """Why it is unavailable: the setting or catalog an administrator must fix."""
    requires: str
    """What must hold for an agent (checked per call by the catalog)."""
    assignableBy: list[Role]
    """Roles the configuration form offers it to."""


class SystemToolsPublic(BaseModel):
    systemTools: list[SystemToolPublic]
