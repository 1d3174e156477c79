"""Function definitions of the System Tools, in OpenAI function-calling form.

Names, fields and descriptions follow the reference text (shared/seeds/000_*).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FunctionDef:
    name: str
    description: str
    parameters: dict[str, Any]


def _schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _i(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


SANDBOX = [
    FunctionDef(
        "runCommand",
        "Run a shell command (fresh bash -lc) in the conversation's Linux "
        "workspace /mnt/work. Returns exit code, stdout and stderr; a wall-clock timeout "
        "and output truncation apply. List conversation files to stage in `files`.",
        _schema(
            ["command"],
            command=_s("The command"),
            timeoutSeconds=_i("Wall-clock limit, capped by the deployment"),
            files=_strings("Conversation files to stage under /mnt/work/in"),
        ),
    ),
    FunctionDef(
        "writeFile",
        "Write a UTF-8 text file inside /mnt/work. Large content must be "
        "created with a command instead.",
        _schema(
            ["path", "content"], path=_s("Path relative to /mnt/work"), content=_s("UTF-8 text")
        ),
    ),
    FunctionDef(
        "readFile",
        "Read a workspace file: text as text, binary as base64; reports truncation.",
        _schema(
            ["path"], path=_s("Path relative to /mnt/work"), maxBytes=_i("Most bytes to return")
        ),
    ),
    FunctionDef(
        "listFiles",
        "List one workspace folder (not recursive): name, size, isDirectory.",
        _schema([], path=_s("Folder relative to /mnt/work", default=".")),
    ),
    FunctionDef(
        "publishFiles",
        "Publish workspace files as downloadable message artifacts. "
        "Nothing is published automatically.",
        _schema(["paths"], paths=_strings("Files relative to /mnt/work")),
    ),
]

JS_EXECUTOR = FunctionDef(
    "JsExecutorAgent",
    "Run synchronous JavaScript with log, logStatus, callAgent, "
    "callAgentsParallel, Excel and artifact helpers; returns the logs and the final expression. "
    "All helpers are synchronous: do not use async, await or Promises.",
    _schema(["code"], code=_s("JavaScript source")),
)

RUN_FUNCTION_BATCH = FunctionDef(
    "run_function_batch",
    "Send many inputs to a named sub-agent function, one private "
    "conversation each (at most 40 at once); results combined in input order.",
    _schema(
        ["functionName", "input"],
        functionName=_s("The sub-agent function"),
        input=_strings("One input string per call"),
    ),
)

SIESTA_HELP = FunctionDef(
    "siesta_help_resolve",
    "Diagnose missing connection or tool setup and return guidance or "
    "an action card. Does not grant permissions.",
    _schema(
        ["userRequest"],
        userRequest=_s("The user's original request"),
        capability=_s("Best matching capability, e.g. email.send, connections.setup"),
        targetService=_s("Service the user named explicitly"),
        targetServices=_strings("Services named explicitly"),
        targetServiceMentionedByUser={"type": "boolean"},
        targetAgentId=_s("Agent to configure"),
        targetAgentName=_s("Agent name"),
        targetAgentMentionedByUser={"type": "boolean"},
        intent=_s(
            "Kind of help",
            enum=[
                "connection_setup",
                "connection_assignment",
                "connection_diagnostics",
                "platform_docs",
            ],
        ),
        topic=_s("Documentation topic"),
    ),
)

IMAGE_GENERATION = FunctionDef(
    "image_generation",
    "Generate an image from a text request; the PNG is stored as a conversation artifact.",
    _schema(["prompt"], prompt=_s("What to draw")),
)

CREATE_TASK = FunctionDef(
    "Platform_CreateTask",
    "Create a task in the agent's task workspace. Create a task only "
    "when the user explicitly asks and never call it proactively.",
    _schema(
        ["summary"],
        summary=_s("Short task summary"),
        prompt=_s("Detailed task prompt"),
        icon=_s("Requested icon filename"),
        status=_s("Task status", enum=["Todo", "InProgress", "Review", "Done"]),
        assignedChatBotId=_s("UUID of the assigned agent"),
        assignedChatBotName=_s("Exact name of the assigned agent"),
    ),
)

GOOGLE_SEARCH = FunctionDef(
    "GoogleSearch.Search",
    "Search Google and return titles, URLs, snippets and short page context.",
    _schema(
        ["query"],
        query=_s("A specific query"),
        count=_i("Results, 1 to 10", minimum=1, maximum=10, default=3),
        country=_s("Google gl country code", default="cz"),
        timePeriod=_s("dateRestrict, e.g. d1, w1, m1, y1"),
    ),
)

FIRECRAWL = [
    FunctionDef(
        "ScrapePageAsync",
        "Scrape one page as markdown with its title.",
        _schema(["url"], url=_s("Page URL"), onlyMainContent={"type": "boolean", "default": True}),
    ),
    FunctionDef(
        "CrawlSiteAsync",
        "Crawl a site and combine page markdown with source URLs.",
        _schema(
            ["url"],
            url=_s("Start URL"),
            limit=_i("Most pages", minimum=1),
            includePaths=_strings("Paths to include"),
            excludePaths=_strings("Paths to exclude"),
        ),
    ),
    FunctionDef(
        "MapSiteAsync",
        "List the links of a site.",
        _schema(
            ["url"], url=_s("Site URL"), search=_s("Filter"), limit=_i("Most links", minimum=1)
        ),
    ),
    FunctionDef(
        "SearchWebAsync",
        "Search the web and return markdown or descriptions.",
        _schema(["query"], query=_s("Query"), limit=_i("Most results", minimum=1)),
    ),
]

WEB_FETCH = FunctionDef(
    "web_fetch",
    "Fetch one web page and return its URL, title, description and main text.",
    _schema(["url"], url=_s("An http(s) URL")),
)

_ID = _s("Id; omit or 'self' for the current agent")
PLATFORM = [
    FunctionDef(
        "Platform_CreateAgent",
        "Create a new agent.",
        _schema(
            ["name"],
            name=_s("Name"),
            systemMessage=_s("System message"),
            description=_s("Description"),
            modelName=_s("Model"),
            temperature={"type": "number"},
            maxTokens=_i("Max tokens"),
            presencePenalty={"type": "number"},
            frequencyPenalty={"type": "number"},
            initialMessage=_s("Initial message"),
            reasoningEffortLevel=_s("Reasoning effort"),
        ),
    ),
    FunctionDef(
        "Platform_CreateAgentFromTemplate",
        "Create an agent from a template.",
        _schema(["templateId"], templateId=_s("Template id")),
    ),
    FunctionDef("Platform_GetAgent", "Read one agent.", _schema([], id=_ID)),
    FunctionDef(
        "Platform_ListAgents",
        "Search organization agents by name.",
        _schema([], search=_s("Name filter"), limit=_i("Most results", minimum=1)),
    ),
    FunctionDef(
        "Platform_UpdateAgent",
        "Update an agent; provided arrays replace, not append.",
        _schema(
            [],
            id=_ID,
            name=_s("Name"),
            systemMessage=_s("System message"),
            skillIds=_strings("Complete list of skills"),
            memoryCollectionIds=_strings("Complete list of collections"),
            memoryPageIds=_strings("Complete list of pages"),
            systemToolIds=_strings("Complete list of System Tools"),
            subAgentIds=_strings("Complete list of sub-agents"),
        ),
    ),
    FunctionDef(
        "Platform_ListConversations",
        "List recent private conversations of an agent.",
        _schema([], agentId=_s("Agent"), search=_s("Filter"), limit=_i("Most results")),
    ),
    FunctionDef(
        "Platform_ListMessages",
        "List recent messages of a private conversation.",
        _schema(
            ["conversationId"],
            conversationId=_s("Conversation"),
            search=_s("Filter"),
            role=_s("Role"),
            limit=_i("Most results"),
        ),
    ),
    FunctionDef(
        "Platform_CreateSkill",
        "Create a skill.",
        _schema(
            ["name", "instructions"],
            name=_s("Name"),
            instructions=_s("Instructions"),
            description=_s("Description"),
        ),
    ),
    FunctionDef("Platform_GetSkill", "Read one skill.", _schema(["id"], id=_s("Skill id"))),
    FunctionDef(
        "Platform_ListSkills",
        "Search skills by name.",
        _schema([], search=_s("Name filter"), limit=_i("Most results")),
    ),
    FunctionDef(
        "Platform_UpdateSkill",
        "Update a skill; only provided fields change.",
        _schema(
            ["id"],
            id=_s("Skill id"),
            name=_s("Name"),
            instructions=_s("Instructions"),
            description=_s("Description"),
        ),
    ),
    FunctionDef(
        "Platform_GetTemplate", "Read one agent template.", _schema(["id"], id=_s("Template id"))
    ),
    FunctionDef(
        "Platform_ListTemplates",
        "Search templates by name.",
        _schema([], search=_s("Name filter"), limit=_i("Most results")),
    ),
    FunctionDef(
        "Platform_CreateMemoryCollection",
        "Create a Memory collection.",
        _schema(["name"], name=_s("Name")),
    ),
    FunctionDef(
        "Platform_GetMemoryCollection",
        "Read a Memory collection.",
        _schema(["id"], id=_s("Collection id")),
    ),
    FunctionDef(
        "Platform_ListMemoryCollections",
        "Search Memory collections.",
        _schema([], search=_s("Filter"), limit=_i("Most results")),
    ),
    FunctionDef(
        "Platform_UpdateMemoryCollection",
        "Rename a Memory collection.",
        _schema(["id", "name"], id=_s("Collection id"), name=_s("Name")),
    ),
    FunctionDef(
        "Platform_CreateMemoryPage",
        "Create a Memory page in a collection.",
        _schema(
            ["collectionId", "name"],
            collectionId=_s("Collection"),
            name=_s("Name"),
            body=_s("Body"),
            order=_i("Order"),
            parentId=_s("Parent page"),
        ),
    ),
    FunctionDef("Platform_GetMemoryPage", "Read a Memory page.", _schema(["id"], id=_s("Page"))),
    FunctionDef(
        "Platform_UpdateMemoryPage",
        "Update a Memory page.",
        _schema(
            ["id"],
            id=_s("Page"),
            name=_s("Name"),
            body=_s("Body"),
            order=_i("Order"),
            parentId=_s("Parent page"),
        ),
    ),
]
