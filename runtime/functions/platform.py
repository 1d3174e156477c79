"""Platform_* functions (Platform Tools and Task Management), as the reference
lists them. They are validated here and forwarded to the platform API.

Platform_CreateTask's rules: ``summary`` required; ``prompt`` defaults to "";
``status`` is Todo, InProgress, Review or Done (default Todo, spelling and case
forgiven); ``assignedChatBotId`` must be a UUID.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import Field, field_validator

from runtime.functions.base import Arguments, FunctionSpec

STATUSES = {"todo": "Todo", "inprogress": "InProgress", "review": "Review", "done": "Done"}
SELF_ID = "Id; omit or 'self' for the current agent"


class CreateTaskArgs(Arguments):
    summary: str = Field(description="Short task summary")
    prompt: str = Field("", description="Detailed task prompt")
    icon: str | None = Field(None, description="Requested icon filename")
    status: Literal["Todo", "InProgress", "Review", "Done"] = Field(
        "Todo", description="Task status"
    )
    assignedChatBotId: str | None = Field(None, description="UUID of the assigned agent")
    assignedChatBotName: str | None = Field(None, description="Exact name of the assigned agent")

    @field_validator("summary")
    @classmethod
    def summary_required(cls, value: str) -> str:
        if not value.strip():
            msg = "summary must not be empty"
            raise ValueError(msg)
        return value

    @field_validator("status", mode="before")
    @classmethod
    def parse_status(cls, value: Any) -> Any:
        if value is None:
            return "Todo"
        if isinstance(value, str) and value.replace(" ", "").lower() in STATUSES:
            return STATUSES[value.replace(" ", "").lower()]
        return value

    @field_validator("assignedChatBotId")
    @classmethod
    def must_be_uuid(cls, value: str | None) -> str | None:
        if value is not None:
            uuid.UUID(value)  # ValueError: "badly formed hexadecimal UUID string"
        return value


class CreateAgentArgs(Arguments):
    name: str = Field(description="Name")
    systemMessage: str | None = Field(None, description="System message")
    description: str | None = Field(None, description="Description")
    modelName: str | None = Field(None, description="Model")
    temperature: float | None = None
    maxTokens: int | None = Field(None, description="Max tokens")
    presencePenalty: float | None = None
    frequencyPenalty: float | None = None
    initialMessage: str | None = Field(None, description="Initial message")
    reasoningEffortLevel: str | None = Field(None, description="Reasoning effort")


class TemplateIdArgs(Arguments):
    templateId: str = Field(description="Template id")


class AgentIdArgs(Arguments):
    id: str | None = Field(None, description=SELF_ID)


class SearchArgs(Arguments):
    search: str | None = Field(None, description="Name filter")
    limit: int | None = Field(None, ge=1, description="Most results")


class UpdateAgentArgs(Arguments):
    """Arrays that are given replace the whole list."""

    id: str | None = Field(None, description=SELF_ID)
    name: str | None = Field(None, description="Name")
    systemMessage: str | None = Field(None, description="System message")
    skillIds: list[str] | None = Field(None, description="Complete list of skills")
    memoryCollectionIds: list[str] | None = Field(None, description="Complete list of collections")
    memoryPageIds: list[str] | None = Field(None, description="Complete list of pages")
    systemToolIds: list[str] | None = Field(None, description="Complete list of System Tools")
    subAgentIds: list[str] | None = Field(None, description="Complete list of sub-agents")


class ListConversationsArgs(Arguments):
    agentId: str | None = Field(None, description="Agent")
    search: str | None = Field(None, description="Filter")
    limit: int | None = Field(None, description="Most results")


class ListMessagesArgs(Arguments):
    conversationId: str = Field(description="Conversation")
    search: str | None = Field(None, description="Filter")
    role: str | None = Field(None, description="Role")
    limit: int | None = Field(None, description="Most results")


class CreateSkillArgs(Arguments):
    name: str = Field(description="Name")
    instructions: str = Field(description="Instructions")
    description: str | None = Field(None, description="Description")


class IdArgs(Arguments):
    id: str = Field(description="Id")


class UpdateSkillArgs(Arguments):
    id: str = Field(description="Skill id")
    name: str | None = Field(None, description="Name")
    instructions: str | None = Field(None, description="Instructions")
    description: str | None = Field(None, description="Description")


class NameArgs(Arguments):
    name: str = Field(description="Name")


class RenameArgs(Arguments):
    id: str = Field(description="Collection id")
    name: str = Field(description="Name")


class CreatePageArgs(Arguments):
    collectionId: str = Field(description="Collection")
    name: str = Field(description="Name")
    body: str | None = Field(None, description="Body")
    order: int | None = Field(None, description="Order")
    parentId: str | None = Field(None, description="Parent page")


class UpdatePageArgs(Arguments):
    id: str = Field(description="Page")
    name: str | None = Field(None, description="Name")
    body: str | None = Field(None, description="Body")
    order: int | None = Field(None, description="Order")
    parentId: str | None = Field(None, description="Parent page")


CREATE_TASK = FunctionSpec(
    "Platform_CreateTask",
    "Create a task in the agent's task workspace. Create a task only "
    "when the user explicitly asks and never call it proactively.",
    CreateTaskArgs,
)
PLATFORM = [
    FunctionSpec("Platform_CreateAgent", "Create a new agent.", CreateAgentArgs),
    FunctionSpec(
        "Platform_CreateAgentFromTemplate", "Create an agent from a template.", TemplateIdArgs
    ),
    FunctionSpec("Platform_GetAgent", "Read one agent.", AgentIdArgs),
    FunctionSpec("Platform_ListAgents", "Search organization agents by name.", SearchArgs),
    FunctionSpec(
        "Platform_UpdateAgent",
        "Update an agent; provided arrays replace, not append.",
        UpdateAgentArgs,
    ),
    FunctionSpec(
        "Platform_ListConversations",
        "List recent private conversations of an agent.",
        ListConversationsArgs,
    ),
    FunctionSpec(
        "Platform_ListMessages", "List recent messages of a private conversation.", ListMessagesArgs
    ),
    FunctionSpec("Platform_CreateSkill", "Create a skill.", CreateSkillArgs),
    FunctionSpec("Platform_GetSkill", "Read one skill.", IdArgs),
    FunctionSpec("Platform_ListSkills", "Search skills by name.", SearchArgs),
    FunctionSpec(
        "Platform_UpdateSkill", "Update a skill; only provided fields change.", UpdateSkillArgs
    ),
    FunctionSpec("Platform_GetTemplate", "Read one agent template.", IdArgs),
    FunctionSpec("Platform_ListTemplates", "Search templates by name.", SearchArgs),
    FunctionSpec("Platform_CreateMemoryCollection", "Create a Memory collection.", NameArgs),
    FunctionSpec("Platform_GetMemoryCollection", "Read a Memory collection.", IdArgs),
    FunctionSpec("Platform_ListMemoryCollections", "Search Memory collections.", SearchArgs),
    FunctionSpec("Platform_UpdateMemoryCollection", "Rename a Memory collection.", RenameArgs),
    FunctionSpec(
        "Platform_CreateMemoryPage", "Create a Memory page in a collection.", CreatePageArgs
    ),
    FunctionSpec("Platform_GetMemoryPage", "Read a Memory page.", IdArgs),
    FunctionSpec("Platform_UpdateMemoryPage", "Update a Memory page.", UpdatePageArgs),
]
