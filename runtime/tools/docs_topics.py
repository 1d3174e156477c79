"""The documentation ``siesta_help_resolve`` points to: sections of the manual (docs/).

A topic a model names is free text; it is matched against this table (by id and
keywords), never turned into a URL. A link is given only when the operator says
where the repository is published (``SIESTA_TOOLS__DOCS_BASE_URL``): the section's
page under it, and its anchor, made the way GitHub makes heading anchors. A test
checks that every section here is a heading of its page, so the table cannot point
at nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DocTopic:
    id: str
    page: str
    """The manual's page that holds the section, from the repository's root."""
    section: str
    """The page's heading, exactly."""
    summary: str
    keywords: tuple[str, ...]

    @property
    def anchor(self) -> str:
        return heading_anchor(self.section)


TOPICS: tuple[DocTopic, ...] = (
    DocTopic(
        "sandbox",
        "docs/concepts/api.md",
        "What is here",
        "The routes: the sandbox functions (runCommand, writeFile, readFile, listFiles, "
        "publishFiles), processes, the file system, files and artifacts.",
        ("sandbox", "command", "commands", "shell", "files", "workspace", "routes", "api"),
    ),
    DocTopic(
        "tools",
        "docs/concepts/tools-and-policies.md",
        "Tool catalog, execution and approvals",
        "Which functions an agent gets, policies (agent, organization, deployment), "
        "approvals, strict function calling and the executions log.",
        (
            "tools",
            "tool",
            "catalog",
            "functions",
            "policies",
            "policy",
            "approvals",
            "approval",
            "confirmation",
            "agents",
            "agent",
            "connections",
            "connection",
        ),
    ),
    DocTopic(
        "content",
        "docs/concepts/tools-and-policies.md",
        "Content tools (System Tool `content`)",
        "Reading a conversation's files without a sandbox: list, peek, grep, stats.",
        ("content", "grep", "peek", "uploads"),
    ),
    DocTopic(
        "memory",
        "docs/concepts/tools-and-policies.md",
        "Memory banks (System Tool `memory_banks`)",
        "Memory that outlives a run: an org's general and conversation banks, semantic "
        "search within a key, computed offline.",
        ("memory", "memories", "remember", "banks", "bank", "recall", "history", "facts"),
    ),
    DocTopic(
        "javascript",
        "docs/guides/javascript-executor.md",
        "JavaScript executor",
        "Synchronous JavaScript with Excel, artifact and sub-agent helpers.",
        (
            "javascript",
            "js",
            "script",
            "scripts",
            "excel",
            "workbook",
            "workflows",
            "workflow",
            "orchestration",
            "subagents",
        ),
    ),
    DocTopic(
        "mcp",
        "docs/guides/mcp.md",
        "MCP",
        "The agent functions as an MCP server (streamable HTTP and stdio).",
        ("mcp",),
    ),
    DocTopic(
        "living",
        "docs/guides/living-in-a-sandbox.md",
        "Living in a sandbox: ports, snapshots, metrics, pause",
        "Ports and previews, snapshots and forks, live metrics, pause and resume.",
        (
            "ports",
            "port",
            "preview",
            "previews",
            "snapshots",
            "snapshot",
            "fork",
            "forks",
            "metrics",
            "pause",
            "resume",
        ),
    ),
    DocTopic(
        "e2b",
        "docs/guides/e2b.md",
        "E2B compatibility",
        "Pointing the stock e2b SDKs at this service, and what they can do here.",
        ("e2b",),
    ),
    DocTopic(
        "lifecycle",
        "docs/concepts/lifecycle.md",
        "Lifecycle, reconciliation, observability",
        "Idle sandboxes paused, stopped and retired; reconciliation; metrics and logs.",
        ("lifecycle", "idle", "reconciliation", "observability", "logs"),
    ),
    DocTopic(
        "retries",
        "docs/guides/agent-backends.md",
        "Safe retries (`Idempotency-Key`)",
        "Retrying a call without running it twice.",
        ("retries", "retry", "idempotency"),
    ),
    DocTopic(
        "security",
        "docs/guides/security.md",
        "Security model",
        "What separates conversations, organizations and the host.",
        ("security", "egress", "network", "isolation"),
    ),
    DocTopic(
        "configuration",
        "docs/guides/configuration.md",
        "Configuration",
        "Every setting, its default and what it limits.",
        ("configuration", "settings", "setting", "limits", "tokens", "scopes"),
    ),
    DocTopic(
        "client",
        "docs/guides/agent-backends.md",
        "Python client",
        "The Python client, sync and async.",
        ("client", "python", "sdk"),
    ),
)

_WORD = re.compile(r"[a-z0-9]+")


def find_topic(topic: str) -> DocTopic | None:
    """The table's entry for what a model asked about (an id, or a keyword in it)."""
    words = _WORD.findall(topic.lower())
    for entry in TOPICS:
        if entry.id in words:
            return entry
    return next((entry for entry in TOPICS if any(w in entry.keywords for w in words)), None)


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")
