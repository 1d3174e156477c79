"""Platform_* functions (Platform Tools and Task Management), as the reference
lists them (seeds/000, "Task Management", "Platform Tools Functions"). The
models here are both the schema the catalog publishes and the validation the
adapters run, so a required field is required in both places.

Platform_CreateTask's rules: ``summary`` required and not blank; ``prompt``
defaults to ""; ``status`` is Todo, InProgress, Review or Done (default Todo,
spelling and case forgiven); ``assignedChatBotId`` must be a UUID.
Update functions change only the fields given (``null`` counts as not given).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from siesta_contract.base import Arguments, Result
from siesta_contract.text import NON_BLANK_TEXT, is_non_blank_text

STATUSES = {"todo": "Todo", "inprogress": "InProgress", "review": "Review", "done": "Done"}
SELF = "self"
SELF_ID = "Agent id; omit or 'self' for the current agent"


def _non_blank(value: str) -> str:
    if not is_non_blank_text(value):
        msg = "must not be empty"
        raise ValueError(msg)
    return value


Text = Annotated[
    str,
    AfterValidator(_non_blank),
    Field(json_schema_extra={"minLength": 1, "pattern": NON_BLANK_TEXT}),
]
"""Text that must say something: not empty, not only whitespace."""
Limit = Annotated[int, Field(ge=1, description="Most results")]


class CreateTaskArgs(Arguments):
    summary: Text = Field(description="Short task summary")
    prompt: str = Field("", description="Detailed task prompt")
    icon: str | None = Field(None, description="Requested icon filename")
    status: Literal["Todo", "InProgress", "Review", "Done"] = Field(
        "Todo", description="Task status"
    )
    assignedChatBotId: str | None = Field(None, description="UUID of the assigned agent")
    assignedChatBotName: str | None = Field(None, description="Exact name of the assigned agent")

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


class TaskButton(Result):
    label: Literal["Open task"] = "Open task"
    url: str


class CreateTaskResult(Result):
    """What the reference promises: task id, summary, status and an "Open task" button."""

    taskId: str
    summary: str
    status: str
    button: TaskButton


class AgentFields(Arguments):
    """The agent fields the reference lists for Platform_CreateAgent (and, as
    "Agent fields", for Platform_UpdateAgent)."""

    name: Text | None = Field(None, description="Name")
    description: str | None = Field(None, description="Description")
    systemMessage: str | None = Field(None, description="System message (the agent's prompt)")
    modelName: Text | None = Field(None, description="Model")
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature")
    maxTokens: int | None = Field(None, ge=1, description="Most tokens in one answer")
    presencePenalty: float | None = Field(None, ge=-2, le=2, description="Presence penalty")
    frequencyPenalty: float | None = Field(None, ge=-2, le=2, description="Frequency penalty")
    initialMessage: str | None = Field(None, description="Initial message")
    reasoningEffortLevel: Text | None = Field(None, description="Reasoning effort")


class CreateAgentArgs(AgentFields):
    """Unset fields take the current agent's model and connection."""

    name: Text = Field(description="Name")


class TemplateIdArgs(Arguments):
    templateId: Text = Field(description="Template id")


class AgentIdArgs(Arguments):
    id: Text | None = Field(None, description=SELF_ID)


class SearchArgs(Arguments):
    search: str | None = Field(None, description="Name filter")
    limit: Limit | None = None


class UpdateAgentArgs(AgentFields):
    """Only the fields given change; arrays that are given replace the whole list."""

    id: Text | None = Field(None, description=SELF_ID)
    skillIds: list[str] | None = Field(None, description="Complete list of skills")
    memoryCollectionIds: list[str] | None = Field(None, description="Complete list of collections")
    memoryPageIds: list[str] | None = Field(None, description="Complete list of pages")
    systemToolIds: list[str] | None = Field(None, description="Complete list of System Tools")
    subAgentIds: list[str] | None = Field(None, description="Complete list of sub-agents")


class ListConversationsArgs(Arguments):
    agentId: str | None = Field(None, description="Agent")
    search: str | None = Field(None, description="Filter")
    limit: Limit | None = None


class ListMessagesArgs(Arguments):
    conversationId: Text = Field(description="Conversation")
    search: str | None = Field(None, description="Filter")
    role: str | None = Field(None, description="Role")
    limit: Limit | None = None


class CreateSkillArgs(Arguments):
    name: Text = Field(description="Name")
    instructions: Text = Field(description="Instructions")
    description: str | None = Field(None, description="Description")


class IdArgs(Arguments):
    id: Text = Field(description="Id")


class UpdateSkillArgs(Arguments):
    id: Text = Field(description="Skill id")
    name: Text | None = Field(None, description="Name")
    instructions: Text | None = Field(None, description="Instructions")
    description: str | None = Field(None, description="Description")


class NameArgs(Arguments):
    name: Text = Field(description="Name")


class RenameArgs(Arguments):
    id: Text = Field(description="Collection id")
    name: Text = Field(description="Name")


class CreatePageArgs(Arguments):
    collectionId: Text = Field(description="Collection")
    name: Text = Field(description="Name")
    body: str | None = Field(None, description="Body")
    order: int | None = Field(None, description="Order")
    parentId: str | None = Field(None, description="Parent page")


class UpdatePageArgs(Arguments):
    id: Text = Field(description="Page")
    name: Text | None = Field(None, description="Name")
    body: str | None = Field(None, description="Body")
    order: int | None = Field(None, description="Order")
    parentId: str | None = Field(None, description="Parent page")
