"""siesta_help_resolve: rule-based guidance on what to set up; it grants nothing."""

from __future__ import annotations

from typing import Any

from runtime.functions.assistant import HelpArgs
from runtime.functions.base import parse_arguments as parse
from runtime.tools.call import Adapter, ToolCall


def help_adapter() -> Adapter:
    """Rule-based guidance: which setup is missing and what to press. Grants nothing."""

    def run(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        a = parse(HelpArgs, "siesta_help_resolve", arguments)
        services = a.targetServices or ([a.targetService] if a.targetService else [])
        named = services if (a.targetServiceMentionedByUser or a.targetServices) else []
        agent = a.targetAgentId or a.targetAgentName
        if a.intent == "platform_docs" or (a.topic and not a.capability and not services):
            topic = a.topic or "tools"
            return {
                "title": f"Documentation: {topic}",
                "state": "docs",
                "message": f"Here is the documentation about {topic}.",
                "docsUrl": f"/docs/{topic}",
            }
        if not named:
            return {
                "title": "Which service?",
                "state": "needs_service",
                "message": "Which service should be connected (for example Gmail or "
                "Outlook)? The request does not name one.",
            }
        joined = ", ".join(named)
        if a.intent == "connection_assignment" or agent:
            return {
                "title": f"Assign {joined}",
                "state": "needs_assignment",
                "message": f"Assign the {joined} connection to {agent or 'the agent'} "
                "with the button below.",
                "action": {
                    "label": "Assign connection",
                    "kind": "assign_connection",
                    "services": named,
                    "agent": agent,
                },
            }
        return {
            "title": f"Connect {joined}",
            "state": "needs_connection",
            "message": f"Connect {joined} first with the button below.",
            "action": {"label": "Set up connection", "kind": "setup_connection", "services": named},
        }

    return run
