"""Which System Tools this deployment offers, for the agent-configuration form.

The reference (seeds/000): "Siesta.AI.App loads the available System Tools and
stores their selected IDs on the agent", and "Sandbox is not listed, or Base
image has no choices: the environment does not expose Sandbox or has no enabled
image catalog". So each tool is listed with whether this deployment can run it
and, when it cannot, why — in words an administrator can act on. What depends on
the agent or the user (a task workspace, an OpenAI model, the Owner/Admin role)
is stated as a requirement, and checked per call by the catalog (``catalog.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from siesta_contract.agents import Role, SystemToolId

from runtime.agents.settings import AgentSettings
from runtime.functions.knowledge import KNOWLEDGE
from runtime.functions.memory import MEMORY
from runtime.images.catalog import ImageCatalog
from runtime.seams.provider_settings import SandboxSettings
from runtime.tools.settings import ToolSettings

ALL_ROLES: tuple[Role, ...] = ("Owner", "Admin", "User")
PRIVILEGED: tuple[Role, ...] = ("Owner", "Admin")


@dataclass(frozen=True)
class SystemToolInfo:
    id: SystemToolId
    name: str
    functions: tuple[str, ...]
    requires: str
    """What must hold for an agent (the reference's "Availability" column)."""
    assignable_by: tuple[Role, ...] = ALL_ROLES
    """Roles the configuration form offers it to (the reference: Platform Tools are
    hidden from normal Users)."""


@dataclass(frozen=True)
class SystemToolAvailability:
    tool: SystemToolInfo
    available: bool
    reason: str | None
    """Why it is unavailable in this deployment (``None`` when available)."""


SYSTEM_TOOLS = (
    SystemToolInfo(
        "task_management",
        "Task Management",
        ("Platform_CreateTask",),
        "The agent has a task workspace (taskWorkspaceId).",
    ),
    SystemToolInfo(
        "google_search",
        "Grounding with Google Search",
        ("GoogleSearch.Search",),
        "The assignment references the system Google Search connection.",
    ),
    SystemToolInfo(
        "web_scraper",
        "Web scraper",
        ("ScrapePageAsync", "CrawlSiteAsync", "MapSiteAsync", "SearchWebAsync", "web_fetch"),
        "The assignment references the system Firecrawl connection.",
    ),
    SystemToolInfo(
        "image_generation",
        "Image generation",
        ("image_generation",),
        "The agent uses an OpenAI gpt-* model.",
    ),
    SystemToolInfo(
        "sandbox",
        "Sandbox",
        ("runCommand", "readFile", "writeFile", "listFiles", "publishFiles"),
        "Sandbox is enabled for the environment and the agent has an enabled base image.",
    ),
    SystemToolInfo(
        "siesta_help",
        "SiestaAI Help",
        ("siesta_help_resolve",),
        "Assigned.",
    ),
    SystemToolInfo(
        "platform_tools",
        "Platform Tools",
        ("Platform_*",),
        "Assigned, and the current user is an Owner or Admin.",
        PRIVILEGED,
    ),
    SystemToolInfo(
        "orchestration",
        "Orchestration",
        ("run_function_batch",),
        "The agent has sub-agents.",
    ),
    SystemToolInfo(
        "js_executor",
        "JavaScript executor",
        ("JsExecutorAgent",),
        "Assigned.",
    ),
    SystemToolInfo(
        "content",
        "Content tools",
        ("list_content_sources", "peek_content", "grep_content", "get_content_stats"),
        "Assigned.",
    ),
    SystemToolInfo(
        "memory_banks",
        "Memory banks",
        tuple(spec.name for spec in MEMORY),
        "Assigned; the org's banks are made by an operator (POST /v1/memory-banks).",
    ),
    SystemToolInfo(
        "knowledge_base",
        "Knowledge base",
        tuple(spec.name for spec in KNOWLEDGE),
        "Assigned; the org's bases are made by an operator (POST /v1/knowledge-bases).",
    ),
)


@dataclass(frozen=True)
class Deployment:
    """The settings that decide which System Tools this deployment can run."""

    sandbox: SandboxSettings
    agents: AgentSettings
    tools: ToolSettings


def _sandbox(settings: Deployment, images: ImageCatalog) -> str | None:
    if not settings.sandbox.enabled:
        return "Sandbox is not enabled in this deployment (SIESTA_SANDBOX__ENABLED)"
    if not images.enabled():
        return "the image catalog has no enabled base image (SIESTA_IMAGES__CATALOG_PATH)"
    return None


def _needs(*pairs: tuple[object, str]) -> str | None:
    """The first missing setting, as the reason (``None`` when all are set)."""
    missing = [name for value, name in pairs if not value]
    return f"not configured: {', '.join(missing)}" if missing else None


UNAVAILABLE_BECAUSE: dict[str, Callable[[Deployment, ImageCatalog], str | None]] = {
    "task_management": lambda s, _: _needs(
        (s.tools.platform_base_url, "SIESTA_TOOLS__PLATFORM_BASE_URL")
    ),
    "google_search": lambda s, _: _needs(
        (s.tools.google_api_key, "SIESTA_TOOLS__GOOGLE_API_KEY"),
        (s.tools.google_cx, "SIESTA_TOOLS__GOOGLE_CX"),
        (s.tools.system_connection_ids.get("google_search"), "the system connection id"),
    ),
    "web_scraper": lambda s, _: _needs(
        (s.tools.firecrawl_api_key, "SIESTA_TOOLS__FIRECRAWL_API_KEY"),
        (s.tools.system_connection_ids.get("web_scraper"), "the system connection id"),
    ),
    "image_generation": lambda s, _: _needs(
        (s.tools.openai_api_key, "SIESTA_TOOLS__OPENAI_API_KEY")
    ),
    "sandbox": _sandbox,
    "platform_tools": lambda s, _: _needs(
        (s.tools.platform_base_url, "SIESTA_TOOLS__PLATFORM_BASE_URL")
    ),
    "orchestration": lambda s, _: (
        "no sub-agent gateway is configured (SIESTA_AGENTS__GATEWAY__TYPE)"
        if s.agents.gateway.type == "none"
        else None
    ),
}
"""Per tool, the deployment-level reason it cannot run (tools not listed always can)."""


def system_tools(settings: Deployment, images: ImageCatalog) -> list[SystemToolAvailability]:
    """Every System Tool, in the reference's order, with this deployment's availability."""
    result = []
    for tool in SYSTEM_TOOLS:
        check = UNAVAILABLE_BECAUSE.get(tool.id)
        reason = check(settings, images) if check else None
        result.append(SystemToolAvailability(tool, reason is None, reason))
    return result
