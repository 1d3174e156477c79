"""What the agent backend sends about an agent and a user (camelCase on the wire)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from siesta_contract.text import EGRESS_ENTRY, ID_MAX_CHARS, ID_PATTERN

SystemToolId = Literal[
    "task_management",
    "google_search",
    "web_scraper",
    "image_generation",
    "sandbox",
    "siesta_help",
    "platform_tools",
    "orchestration",
    "js_executor",
    "content",
    "memory_banks",
    "knowledge_base",
]
Role = Literal["Owner", "Admin", "User"]
Policy = Literal["enabled", "disabled", "confirm"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ModelRef(_Wire):
    provider: str
    name: str


class ToolAnnotations(_Wire):
    """What a function declares it does, as MCP's tool annotations say it: hints from
    whoever defines the function, which decide its default policy."""

    read_only: bool | None = Field(None, alias="readOnlyHint")
    """It changes nothing (MCP's default: false)."""
    destructive: bool | None = Field(None, alias="destructiveHint")
    """A change it makes may destroy or overwrite (MCP's default: true)."""
    idempotent: bool | None = Field(None, alias="idempotentHint")
    """Repeating a call changes nothing more (MCP's default: false)."""
    open_world: bool | None = Field(None, alias="openWorldHint")
    """It reaches outside its own system (MCP's default: true)."""


class ConnectionFunction(_Wire):
    name: str = Field(min_length=1, max_length=128)
    policy: Policy | None = None
    """``None``: the deployment's policy, else the default rule: what ``annotations``
    declare, else what the name says (confirmation for send, publish, create, update,
    delete, permission, financial and production-impacting actions; none for reads);
    a function that says neither asks first."""
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    annotations: ToolAnnotations | None = None


Principal = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS)]
"""A user, group or organization id, in the agent backend's own terms."""


class Connection(_Wire):
    id: str = Field(min_length=1)
    kind: Literal["shared", "private"]
    """``shared``: a team's or the organization's credential; ``private``: the
    conversation user's own (the backend resolves it from the user)."""
    functions: list[ConnectionFunction] = Field(default_factory=list)
    shared_with: list[Principal] | None = Field(None, alias="sharedWith")
    """Whom a shared connection is shared with. With the agent's ``audience`` the
    catalog checks that it covers everyone the agent serves; ``None``: not checked.
    A private connection's is never read (its credential is the user's own)."""


class AgentFiles(_Wire):
    """The agent's uploaded files (peer seed 003, "File search"): a knowledge base of
    the org holding them, and the File Retrieval Strategy that decides how the model
    sees them."""

    knowledge_base_id: str = Field(alias="knowledgeBaseId", min_length=1, max_length=64)
    strategy: Literal["direct", "rag"] = "direct"
    """``direct``: the files are pre-loaded into context (the catalog's
    ``preloadedFiles``) up to the budget, smallest first, and ``file_search`` is offered
    only when one overflowed it and ``fileSearch`` is on. ``rag``: ``file_search``
    whenever the agent has a file, whether or not ``fileSearch`` is on."""
    file_search: bool = Field(False, alias="fileSearch")
    """The File search switch."""


class AgentConfig(_Wire):
    id: str = Field(min_length=1)
    system_tool_ids: list[SystemToolId] = Field(default_factory=list, alias="systemToolIds")
    base_image: str | None = Field(None, alias="baseImage")
    egress_allow: list[Annotated[str, Field(pattern=f"^{EGRESS_ENTRY}$")]] | None = Field(
        None, alias="egressAllow"
    )
    """The agent's narrowing of the deployment's sandbox egress allowlist (host names,
    ``*.suffix``); it can only take hosts away. ``[]``: no network for this agent."""
    model: ModelRef | None = None
    task_workspace_id: str | None = Field(None, alias="taskWorkspaceId")
    content_default: str | None = Field(None, alias="contentDefault", min_length=1)
    """The content item this run is about (a conversation file's id or name), as the
    reference's run metadata gives it: the content tools use it when the model names no
    file, and ``list_content_sources`` is left out."""
    knowledge_base_default: str | None = Field(
        None, alias="knowledgeBaseDefault", min_length=1, max_length=64
    )
    """The reference's scenario 2a: the run's metadata names a knowledge base
    (``knowledge_base_id``): ``search_knowledge_base`` offers it as its parameter's
    default and ``list_knowledge_bases`` is left out."""
    files: AgentFiles | None = None
    """The agent's uploaded files and their retrieval strategy (``file_search``)."""
    knowledge_base_in_prompt: bool = Field(False, alias="knowledgeBaseInPrompt")
    """The reference's scenario 1: the prompt names the knowledge base to search, so
    the model gets ``search_knowledge_base`` alone (the id required). Neither this nor
    ``knowledgeBaseDefault`` (scenario 2b): both functions are offered."""
    sub_agents: list[str] = Field(default_factory=list, alias="subAgents")
    connections: list[Connection] = Field(default_factory=list)
    audience: list[Principal] | None = None
    """Whom the agent is available to (the same kind of ids as a connection's
    ``sharedWith``); ``None``: not said, so shared connections are not checked."""
    function_policies: dict[str, Policy] = Field(default_factory=dict, alias="functionPolicies")
    """Tool policy for System Tool functions, e.g. ``{"runCommand": "confirm"}``
    (the default is ``enabled``; ``disabled`` removes the function)."""
    system_connection_ids: dict[str, str] = Field(default_factory=dict, alias="systemConnectionIds")
    """Which connection a connection-backed System Tool's assignment references,
    e.g. ``{"google_search": "system-google-search"}``."""


class UserInfo(_Wire):
    id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)
    role: Role


class AgentRegistration(AgentConfig):
    """An agent's configuration to register (``POST /v1/agents``): its ``id`` is the
    ``X-Siesta-Agent`` value that calls name it by."""

    id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)


class RegisteredAgentPublic(BaseModel):
    """An agent registered in its org (``POST /v1/agents``): every call that
    names it by ``X-Siesta-Agent`` — the direct sandbox routes, ``/js``, ``/mcp`` — runs
    under this configuration, as ``/v1/tools/execute`` runs under the one in its body."""

    agent: AgentConfig
    updatedAt: float
    updatedBy: str
    """The token that registered this version."""


class RegisteredAgentsPublic(BaseModel):
    agents: list[RegisteredAgentPublic]
    """The org's registered agents, by id."""
