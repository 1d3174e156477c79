"""Which functions an agent gets for a user, right now: the gating rules.

The rules are the reference text's (shared/seeds/000_*, "System Tools"):

* Platform_* only when Platform Tools is assigned AND the user is Owner or Admin;
* image_generation only when assigned AND the model is OpenAI with a ``gpt-`` name;
* the sandbox functions only when the deployment enables Sandbox AND it is
  assigned with an enabled catalog base image;
* Platform_CreateTask only with a task workspace; GoogleSearch.Search and the
  Firecrawl functions only when the assignment references the system connection;
  run_function_batch when assigned (with a warning when there are no sub-agents);
  JsExecutorAgent and siesta_help_resolve when assigned; the content tools
  (``list_content_sources``, ``peek_content``, ``grep_content``,
  ``get_content_stats``, over the conversation's files) and the memory bank
  functions (``list_memory_banks``, ``add_memory``, ``search_memory``, ...) when assigned;
* ``search_knowledge_base`` when the knowledge base System Tool is assigned, with
  ``list_knowledge_bases`` unless the base is known (the reference's scenarios: named
  in the prompt, ``knowledgeBaseInPrompt``; in the run's metadata,
  ``knowledgeBaseDefault``, which becomes the parameter's default);
* a shared connection's functions only when it is shared with all of the agent's
  audience, when the request says both (``sharedWith``, ``audience``);
* every function's policy comes from ``policy.py`` (the agent's configuration,
  the deployment's policies, the reference's confirmation rule); ``disabled``
  ones never appear, and each entry says which policy holds and why.

Name collisions: system-provided functions win, then shared connections, then
private ones, then the first listed (the peer platform's rule, seeds/003_*);
``notes`` says what was dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from siesta_contract.agents import AgentConfig, Connection, Policy, UserInfo
from siesta_contract.base import not_nullable

from runtime.functions.assistant import IMAGE_GENERATION, RUN_FUNCTION_BATCH, SIESTA_HELP
from runtime.functions.base import FunctionSpec
from runtime.functions.content import CONTENT, FILE_FUNCTIONS, LIST_CONTENT_SOURCES
from runtime.functions.js import JS_EXECUTOR
from runtime.functions.knowledge import (
    FILE_SEARCH,
    KNOWLEDGE,
    LIST_KNOWLEDGE_BASES,
    SEARCH_KNOWLEDGE_BASE,
)
from runtime.functions.memory import MEMORY
from runtime.functions.platform import CREATE_TASK, PLATFORM
from runtime.functions.sandbox import SANDBOX
from runtime.functions.web import FIRECRAWL, GOOGLE_SEARCH, WEB_FETCH
from runtime.images.catalog import ImageCatalog
from runtime.tools.policy import effective_policy
from runtime.tools.settings import ToolSettings

PRIVILEGED_ROLES = ("Owner", "Admin")


@dataclass(frozen=True)
class CatalogFunction:
    name: str
    description: str
    parameters: dict[str, Any]
    group: str
    """``System``, ``Shared`` or ``Private``."""
    source: str
    """Why it is there: ``system:<tool id>`` or ``connection:<id>``."""
    policy: Policy = "enabled"
    policy_reason: str = "default"
    """Where the policy comes from (``policy.py``), for the configuration form."""

    @property
    def connection_kind(self) -> str | None:
        """``shared`` or ``private`` for a connection function."""
        return self.group.lower() if self.source.startswith("connection:") else None

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "group": self.group,
            "source": self.source,
            "policy": self.policy,
            "policyReason": self.policy_reason,
        }


@dataclass
class Catalog:
    functions: list[CatalogFunction] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def find(self, name: str) -> CatalogFunction | None:
        return next((f for f in self.functions if f.name == name), None)


def build_catalog(
    agent: AgentConfig,
    user: UserInfo,
    settings: ToolSettings,
    images: ImageCatalog,
    *,
    sandbox_enabled: bool,
    org_floor: Mapping[str, Policy] | None = None,
    file_search: bool = False,
) -> Catalog:
    """``org_floor``: the org's floor as it holds for this agent
    (``Services.org_floor``: lifted only for an agent the org registered);
    ``file_search``: whether the agent's files call for it (``Services.tool_catalog``
    reads them: seed 003's strategies)."""
    catalog = Catalog()
    floor = settings.function_policies
    chosen = _system_functions(agent, user, settings, images, sandbox_enabled, catalog.notes)
    if file_search:
        chosen.append((FILE_SEARCH, "files"))
    for definition, tool in chosen:
        agent_policy = agent.function_policies.get(definition.name)
        rule = effective_policy(
            definition.name,
            system=True,
            agent=agent_policy,
            deployment=floor,
            organization=org_floor,
        )
        if rule.policy == "disabled":
            continue
        _add(
            catalog,
            CatalogFunction(
                definition.name,
                definition.description,
                _parameters(definition, agent),
                "System",
                f"system:{tool}",
                rule.policy,
                rule.reason,
            ),
        )
    for connection in sorted(agent.connections, key=lambda c: c.kind != "shared"):
        uncovered = _outside_sharing(connection, agent.audience)
        if uncovered:
            catalog.notes.append(
                f"connection {connection.id}'s functions were left out: it is not shared "
                f"with all of the agent's audience (missing: {', '.join(uncovered)})"
            )
            continue
        for function in connection.functions:
            rule = effective_policy(
                function.name,
                system=False,
                agent=function.policy,
                deployment=floor,
                annotations=function.annotations,
                organization=org_floor,
            )
            if rule.policy == "disabled":
                continue
            _add(
                catalog,
                CatalogFunction(
                    function.name,
                    function.description,
                    function.parameters or _EMPTY,
                    connection.kind.capitalize(),
                    f"connection:{connection.id}",
                    rule.policy,
                    rule.reason,
                ),
            )
    return catalog


_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _outside_sharing(connection: Connection, audience: list[str] | None) -> list[str]:
    """Who the agent serves but a shared connection is not shared with (sorted);
    nothing when either side is not said."""
    if connection.kind != "shared" or connection.shared_with is None or audience is None:
        return []
    return sorted(set(audience) - set(connection.shared_with))


def _add(catalog: Catalog, function: CatalogFunction) -> None:
    kept = catalog.find(function.name)
    if kept is None:
        catalog.functions.append(function)
        return
    catalog.notes.append(
        f"{function.name} from {function.source} was dropped: {kept.source} provides a "
        "function of the same name (system tools win, then shared, then private connections)"
    )


def _system_functions(
    agent: AgentConfig,
    user: UserInfo,
    settings: ToolSettings,
    images: ImageCatalog,
    sandbox_enabled: bool,
    notes: list[str],
) -> list[tuple[FunctionSpec, str]]:
    assigned = set(agent.system_tool_ids)
    chosen: list[tuple[FunctionSpec, str]] = []

    if "task_management" in assigned:
        if agent.task_workspace_id:
            chosen.append((CREATE_TASK, "task_management"))
        else:
            notes.append("Task Management is assigned but the agent has no taskWorkspaceId")
    for tool, functions in (
        ("google_search", [GOOGLE_SEARCH]),
        ("web_scraper", FIRECRAWL),
    ):
        if tool in assigned:
            expected = settings.system_connection_ids.get(tool)
            if expected and agent.system_connection_ids.get(tool) == expected:
                chosen.extend((function, tool) for function in functions)
            else:
                notes.append(
                    f"{tool} is assigned but does not reference the system connection {expected!r}"
                )
    if "web_scraper" in assigned:
        # Needs no provider connection: the service fetches the page itself.
        chosen.append((WEB_FETCH, "web_scraper"))
    if "image_generation" in assigned:
        model = agent.model
        if model and model.provider.lower() == "openai" and model.name.startswith("gpt-"):
            chosen.append((IMAGE_GENERATION, "image_generation"))
        else:
            notes.append("Image generation needs an OpenAI gpt-* model")
    if "sandbox" in assigned:
        image = images.find(agent.base_image or "")
        if not sandbox_enabled:
            notes.append("Sandbox is assigned but not enabled in this deployment")
        elif image is None or not image.enabled:
            notes.append(
                f"Sandbox is assigned but base image {agent.base_image!r} is not an "
                "enabled catalog image"
            )
        else:
            chosen.extend((function, "sandbox") for function in SANDBOX)
    if "siesta_help" in assigned:
        chosen.append((SIESTA_HELP, "siesta_help"))
    if "platform_tools" in assigned:
        if user.role in PRIVILEGED_ROLES:
            chosen.extend((function, "platform_tools") for function in PLATFORM)
        else:
            notes.append("Platform Tools are hidden: the user is not an Owner or Admin")
    if "orchestration" in assigned:
        chosen.append((RUN_FUNCTION_BATCH, "orchestration"))
        if not agent.sub_agents:
            notes.append(
                "warning: run_function_batch is listed but the agent has no "
                "sub-agents, so calls cannot do anything useful"
            )
    if "js_executor" in assigned:
        chosen.append((JS_EXECUTOR, "js_executor"))
    if "content" in assigned:
        # The run names its content: the tools read it by default, nothing to list.
        known = agent.content_default is not None
        chosen.extend(
            (function, "content")
            for function in CONTENT
            if not (known and function is LIST_CONTENT_SOURCES)
        )
    if "memory_banks" in assigned:
        chosen.extend((function, "memory_banks") for function in MEMORY)
    if "knowledge_base" in assigned:
        # Scenarios 1 and 2a: the base is known (the prompt's, the run's); 2b: discover it.
        known = agent.knowledge_base_in_prompt or agent.knowledge_base_default is not None
        chosen.extend(
            (function, "knowledge_base")
            for function in KNOWLEDGE
            if not (known and function is LIST_KNOWLEDGE_BASES)
        )
    return chosen


def _parameters(definition: FunctionSpec, agent: AgentConfig) -> dict[str, Any]:
    """The function's schema as this agent sees it: a content tool's ``file`` is
    required, or defaults to the run's content item (the reference's scenarios)."""
    parameters = definition.parameters()
    if definition.name == SEARCH_KNOWLEDGE_BASE.name:
        base = parameters["properties"]["knowledge_base_id"]
        if agent.knowledge_base_default is None:
            parameters["required"] = sorted({*parameters["required"], "knowledge_base_id"})
            parameters["properties"]["knowledge_base_id"] = not_nullable(base)
        else:
            base["default"] = agent.knowledge_base_default
    if definition.name in FILE_FUNCTIONS:
        if agent.content_default is None:
            parameters["required"] = sorted({*parameters["required"], "file"})
            file = parameters["properties"]["file"]
            parameters["properties"]["file"] = not_nullable(file)  # a name, never null
        else:
            parameters["properties"]["file"]["default"] = agent.content_default
    return parameters
