"""Platform_* functions (Platform Tools and Task Management), as the reference
lists them (models and their rules: ``siesta_contract.functions.platform``)."""

from __future__ import annotations

from siesta_contract.functions.platform import (
    AgentIdArgs,
    CreateAgentArgs,
    CreatePageArgs,
    CreateSkillArgs,
    CreateTaskArgs,
    CreateTaskResult,
    IdArgs,
    ListConversationsArgs,
    ListMessagesArgs,
    NameArgs,
    RenameArgs,
    SearchArgs,
    TemplateIdArgs,
    UpdateAgentArgs,
    UpdatePageArgs,
    UpdateSkillArgs,
)

from runtime.functions.base import FunctionSpec

CREATE_TASK = FunctionSpec(
    "Platform_CreateTask",
    "Create a task in the agent's task workspace. Create a task only "
    "when the user explicitly asks and never call it proactively.",
    CreateTaskArgs,
    CreateTaskResult,
)
PLATFORM = [
    FunctionSpec(
        "Platform_CreateAgent",
        "Create a new agent; unset fields use the current agent's model and connection.",
        CreateAgentArgs,
    ),
    FunctionSpec(
        "Platform_CreateAgentFromTemplate", "Create an agent from a template.", TemplateIdArgs
    ),
    FunctionSpec("Platform_GetAgent", "Read one agent (omit id for this agent).", AgentIdArgs),
    FunctionSpec("Platform_ListAgents", "Search organization agents by name.", SearchArgs),
    FunctionSpec(
        "Platform_UpdateAgent",
        "Update an agent (omit id for this agent); only provided fields change, "
        "provided arrays replace, not append.",
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
    FunctionSpec(
        "Platform_UpdateMemoryPage",
        "Update a Memory page; only provided fields change.",
        UpdatePageArgs,
    ),
]
