"""siesta_help_resolve: setup guidance from the agent's own configuration; it grants nothing.

The call carries the agent's configuration (its connections, System Tools and
sub-agents), so the answer says what is there, not only what might be missing.
The rules, first match wins:

1. ``platform_docs``, or a topic with no capability and no service: documentation.
2. ``targetAgentMentionedByUser`` naming another agent: its configuration is not in
   this call, so the answer is an assignment to that agent (never "connect" a
   service this agent already has; it names that connection instead).
3. ``connection_diagnostics``: what is connected and what is missing.
4. A capability of a System Tool (``web.search``, ``image.generate``, ...): on, or
   "turn it on"; orchestration also needs sub-agents.
5. The services: those the user named, or the one a capability names itself
   (``slack.send_message``); a generic area (``email``) names none, so Gmail is
   never guessed, but a connected Gmail counts for ``email.send``.
6. A service connected to this agent: ready, or "enable function X"; never "connect".
7. A service not connected: "assign" for ``connection_assignment`` /
   ``connections.assign``, else "connect".
8. No service known: ask which one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from siesta_contract.agents import AgentConfig, Connection, SystemToolId
from siesta_contract.functions.assistant import HelpArgs

from runtime.functions.base import parse_arguments as parse
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.docs_topics import TOPICS, find_topic

AREA_SERVICES: dict[str, tuple[str, ...]] = {
    "email": ("Gmail", "Outlook"),
    "calendar": ("Google Calendar", "Outlook"),
    "drive": ("Google Drive", "OneDrive"),
    "slack": ("Slack",),
    "jira": ("Jira",),
    "hubspot": ("HubSpot",),
}
"""Services that serve a capability's area; a one-service area names its service."""
SYSTEM_TOOL_CAPABILITIES: dict[str, SystemToolId] = {
    "web.search": "google_search",
    "search": "google_search",
    "web.scrape": "web_scraper",
    "web.crawl": "web_scraper",
    "web.map": "web_scraper",
    "image": "image_generation",
    "sandbox": "sandbox",
    "code": "sandbox",
    "tasks": "task_management",
    "task": "task_management",
    "platform": "platform_tools",
    "agents": "orchestration",
    "orchestration": "orchestration",
    "js": "js_executor",
}
"""Capabilities (full name, else area) that a System Tool provides."""
SYSTEM_TOOL_LABELS: dict[SystemToolId, str] = {
    "task_management": "Task Management",
    "google_search": "Grounding with Google Search",
    "web_scraper": "Web scraper",
    "image_generation": "Image generation",
    "sandbox": "Sandbox",
    "siesta_help": "SiestaAI Help",
    "platform_tools": "Platform Tools",
    "orchestration": "Orchestration",
    "js_executor": "JavaScript executor",
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass(frozen=True)
class Diagnosis:
    """The agent's configuration as the help rules read it."""

    agent: AgentConfig

    def services_of(self, connection: Connection) -> list[str]:
        """The services a connection serves, from its function names (``Gmail.Send``)."""
        prefixes = {f.name.split(".", 1)[0] for f in connection.functions if "." in f.name}
        return sorted(prefixes) or [connection.id]

    def connections_for(self, service: str) -> list[Connection]:
        key = _key(service)
        return [
            c
            for c in self.agent.connections
            if key in {_key(s) for s in self.services_of(c)} or key in _key(c.id)
        ]

    def connected(self) -> list[dict[str, Any]]:
        return [
            {
                "id": c.id,
                "kind": c.kind,
                "services": self.services_of(c),
                "functions": [f.name for f in c.functions if f.policy != "disabled"],
                "disabledFunctions": [f.name for f in c.functions if f.policy == "disabled"],
            }
            for c in self.agent.connections
        ]


def _capability_parts(capability: str | None) -> tuple[str, str]:
    area, _, action = (capability or "").lower().partition(".")
    return area, action


def _system_tool(capability: str | None) -> SystemToolId | None:
    area, _ = _capability_parts(capability)
    return SYSTEM_TOOL_CAPABILITIES.get((capability or "").lower()) or (
        SYSTEM_TOOL_CAPABILITIES.get(area)
    )


def _services(a: HelpArgs, diagnosis: Diagnosis) -> tuple[list[str], bool]:
    """The services the answer is about, and whether the user (or the capability
    itself) named them rather than this agent's connections suggesting them."""
    named = a.targetServices or ([a.targetService] if a.targetService else [])
    if named and (a.targetServiceMentionedByUser or a.targetServices):
        return list(dict.fromkeys(named)), True
    area, _ = _capability_parts(a.capability)
    candidates = AREA_SERVICES.get(area, ())
    if len(candidates) == 1:
        return list(candidates), True
    return [s for s in candidates if diagnosis.connections_for(s)], False


def _answer(title: str, state: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"title": title, "state": state, "message": message, **extra}


def _docs(topic: str | None, docs_base_url: str | None) -> dict[str, Any]:
    """The manual's section about ``topic`` (a link only where the operator published
    the repository); a topic the table does not know gets the list of topics."""
    entry = find_topic(topic or "tools")
    if entry is None:
        known = ", ".join(t.id for t in TOPICS)
        return _answer(
            "Which part of the documentation?",
            "unknown_topic",
            f"There is no documentation section about {topic!r}. Topics: {known}.",
            topics=[t.id for t in TOPICS],
        )
    base = docs_base_url.rstrip("/") if docs_base_url else None
    url = f"{base}/{entry.page}#{entry.anchor}" if base else None
    return _answer(
        f"Documentation: {entry.section}",
        "docs",
        entry.summary,
        docs={
            "topic": entry.id,
            "page": entry.page,
            "section": entry.section,
            "anchor": entry.anchor,
            "url": url,
        },
    )


def _other_agent(agent: str, services: list[str], d: Diagnosis) -> dict[str, Any]:
    if not services:
        return _answer(
            "Which service?",
            "needs_service",
            f"Which service should {agent} use (for example Gmail or Outlook)? "
            "The request does not name one.",
        )
    joined = ", ".join(services)
    known = [c.id for s in services for c in d.connections_for(s)]
    where = f" (this agent already uses {', '.join(known)})" if known else ""
    return _answer(
        f"Assign {joined} to {agent}",
        "needs_assignment",
        f"Assign the {joined} connection{where} to {agent} with the button below.",
        action={
            "label": "Assign connection",
            "kind": "assign_connection",
            "services": services,
            "connections": known,
            "agent": agent,
        },
    )


def _diagnostics(a: HelpArgs, services: list[str], d: Diagnosis) -> dict[str, Any]:
    missing = [s for s in services if not d.connections_for(s)]
    tool = _system_tool(a.capability)
    if tool and tool not in d.agent.system_tool_ids:
        missing.append(f"System Tool {SYSTEM_TOOL_LABELS[tool]}")
    if tool == "orchestration" and not d.agent.sub_agents:
        missing.append("sub-agents")
    area, _ = _capability_parts(a.capability)
    if not tool and area in AREA_SERVICES and not services:
        missing.append(f"a {area} connection ({' or '.join(AREA_SERVICES[area])})")
    connected = d.connected()
    have = (
        "; ".join(f"{c['id']} ({c['kind']}: {', '.join(c['services'])})" for c in connected)
        or "no connections"
    )
    message = f"Connected: {have}. Missing: {', '.join(missing) or 'nothing for this request'}."
    extra: dict[str, Any] = {
        "connected": connected,
        "systemTools": list(d.agent.system_tool_ids),
        "subAgents": list(d.agent.sub_agents),
        "missing": missing,
    }
    unconnected = [s for s in services if not d.connections_for(s)]
    if unconnected:
        extra["action"] = {
            "label": "Set up connection",
            "kind": "setup_connection",
            "services": unconnected,
        }
    return _answer("Connection diagnostics", "diagnostics", message, **extra)


def _system_tool_answer(tool: SystemToolId, d: Diagnosis) -> dict[str, Any]:
    label = SYSTEM_TOOL_LABELS[tool]
    if tool not in d.agent.system_tool_ids:
        return _answer(
            f"Turn on {label}",
            "needs_system_tool",
            f"Turn on {label} in Configuration > System Tools with the button below.",
            action={"label": f"Turn on {label}", "kind": "enable_system_tool", "tool": tool},
        )
    if tool == "orchestration" and not d.agent.sub_agents:
        return _answer(
            "Add sub-agents",
            "needs_sub_agents",
            "Orchestration is on, but this agent has no sub-agents to call; add them "
            "in its configuration.",
            action={"label": "Add sub-agents", "kind": "add_sub_agents"},
        )
    return _answer(f"{label} is on", "ready", f"{label} is already on for this agent.")


def _connected_answer(a: HelpArgs, service: str, connections: list[Connection]) -> dict[str, Any]:
    ids = ", ".join(f"{c.id} ({c.kind})" for c in connections)
    _, action = _capability_parts(a.capability)
    verb = _key(action.split("_", 1)[0]) if action else ""
    functions = [f for c in connections for f in c.functions]
    if verb:
        matching = [f for f in functions if verb in _key(f.name.split(".", 1)[-1])]
        usable = [f.name for f in matching if f.policy != "disabled"]
        if usable:
            return _answer(
                f"{service} is connected",
                "ready",
                f"{service} is connected to this agent ({ids}); {', '.join(usable)} "
                f"can do {a.capability}.",
            )
        if matching:
            names = [f.name for f in matching]
            return _answer(
                f"Enable {names[0]}",
                "needs_function",
                f"{service} is connected to this agent ({ids}), but {', '.join(names)} "
                "is disabled; enable it on the agent's connection with the button below.",
                action={
                    "label": f"Enable {names[0]}",
                    "kind": "enable_function",
                    "functions": names,
                },
            )
        return _answer(
            f"{service} has no function for {a.capability}",
            "needs_function",
            f"{service} is connected to this agent ({ids}), but none of its functions "
            f"does {a.capability}; enable one on the connection with the button below.",
            action={
                "label": "Edit connection functions",
                "kind": "enable_function",
                "connections": [c.id for c in connections],
            },
        )
    return _answer(
        f"{service} is connected",
        "ready",
        f"{service} is already connected to this agent ({ids}); no new connection is needed.",
    )


def help_adapter(docs_base_url: str | None = None) -> Adapter:
    """Guidance from the agent's configuration: what is there, what to press. Grants
    nothing. ``docs_base_url``: where the repository is published (links to the
    manual's sections)."""

    def run(call: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        a = parse(HelpArgs, "siesta_help_resolve", arguments)
        d = Diagnosis(call.agent)
        services, named = _services(a, d)
        if a.intent == "platform_docs" or (a.topic and not a.capability and not services):
            return _docs(a.topic, docs_base_url)
        other = a.targetAgentId or a.targetAgentName
        if a.targetAgentMentionedByUser and other and other != call.agent.id:
            return _other_agent(other, services if named else [], d)
        if a.intent == "connection_diagnostics":
            return _diagnostics(a, services, d)
        tool = _system_tool(a.capability)
        if tool:
            return _system_tool_answer(tool, d)
        if not services:
            return _answer(
                "Which service?",
                "needs_service",
                "Which service should be connected (for example Gmail or Outlook)? "
                "The request does not name one.",
            )
        if len(services) == 1 or a.capability:
            for service in services:
                if connections := d.connections_for(service):
                    return _connected_answer(a, service, connections)
        missing = [s for s in services if not d.connections_for(s)]
        if not missing:
            joined = ", ".join(services)
            return _answer(
                f"{joined} connected",
                "ready",
                f"{joined} are already connected to this agent; no new connection is needed.",
            )
        joined = ", ".join(missing)
        present = [s for s in services if s not in missing]
        also = f" ({', '.join(present)} is already connected)" if present else ""
        assign = a.intent == "connection_assignment" or a.capability == "connections.assign"
        if assign:
            return _answer(
                f"Assign {joined}",
                "needs_assignment",
                f"Assign the {joined} connection to this agent with the button below{also}.",
                action={
                    "label": "Assign connection",
                    "kind": "assign_connection",
                    "services": missing,
                    "agent": call.agent.id,
                },
            )
        return _answer(
            f"Connect {joined}",
            "needs_connection",
            f"Connect {joined} first with the button below{also}.",
            action={"label": "Set up connection", "kind": "setup_connection", "services": missing},
        )

    return run
