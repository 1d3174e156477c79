"""image_generation, siesta_help_resolve and connection functions."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from runtime.config import ToolSettings
from runtime.context import CallContext
from runtime.errors import ProviderFailed, ToolNotConfigured
from runtime.files import ConversationFiles
from runtime.functions.assistant import HelpArgs, ImageArgs, ImageResult
from runtime.functions.base import parse_arguments as parse
from runtime.functions.files import FilePublic
from runtime.store.records import FileKind
from runtime.tools.adapters.search import call_api
from runtime.tools.executor import Adapter
from runtime.upstreams import Upstreams

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_adapter(
    settings: ToolSettings, files: ConversationFiles, upstreams: Upstreams
) -> Adapter:
    """OpenAI Images API; the PNG becomes an artifact of the conversation."""
    client = upstreams.client("openai")

    def run(ctx: CallContext, arguments: dict[str, Any]) -> dict[str, Any]:
        args = parse(ImageArgs, "image_generation", arguments)
        if settings.openai_api_key is None:
            msg = "image_generation needs SIESTA_TOOLS__OPENAI_API_KEY"
            raise ToolNotConfigured(msg)
        body = call_api(
            client,
            "POST",
            f"{settings.openai_base_url}/v1/images/generations",
            "the OpenAI Images API",
            headers={"Authorization": f"Bearer {settings.openai_api_key.get_secret_value()}"},
            json={"model": settings.image_model, "prompt": args.prompt, "n": 1},
        )
        try:
            png = base64.b64decode(body["data"][0]["b64_json"], validate=True)
        except (KeyError, IndexError, TypeError, binascii.Error) as exc:
            msg = "the OpenAI Images API answered without an image"
            raise ProviderFailed(msg) from exc
        if not png.startswith(PNG_SIGNATURE):
            msg = "the OpenAI Images API answered with something that is not a PNG"
            raise ProviderFailed(msg)
        count = sum(1 for f in files.list_files(ctx) if f.name.startswith("generated-image-"))
        record = files.add_bytes(ctx, f"generated-image-{count + 1}.png", FileKind.ARTIFACT, png)
        return ImageResult(artifact=FilePublic.of(record)).model_dump(mode="json")

    return run


def help_adapter() -> Adapter:
    """Rule-based guidance: which setup is missing and what to press. Grants nothing."""

    def run(_: CallContext, arguments: dict[str, Any]) -> dict[str, Any]:
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


def connection_adapter(settings: ToolSettings, upstreams: Upstreams) -> Callable[[str], Adapter]:
    """Connection functions run where their credentials are: the agent backend.

    ``POST {connections_url}`` with ``{"function", "arguments", "context"}``; the
    backend answers ``{"result": ...}``.
    """
    client = upstreams.client("connections")

    def for_function(function: str) -> Adapter:
        def forward(ctx: CallContext, arguments: dict[str, Any]) -> Any:
            if not settings.connections_url:
                msg = "connection functions need SIESTA_TOOLS__CONNECTIONS_URL"
                raise ToolNotConfigured(msg)
            token = (
                settings.connections_token.get_secret_value() if settings.connections_token else ""
            )
            body = call_api(
                client,
                "POST",
                settings.connections_url,
                "the connection gateway",
                headers={"Authorization": f"Bearer {token}"} if token else {},
                json={
                    "function": function,
                    "arguments": arguments,
                    "context": {
                        "org": ctx.org,
                        "user": ctx.user,
                        "agentId": ctx.agent,
                        "conversationId": ctx.conversation,
                    },
                },
            )
            return body.get("result") if isinstance(body, dict) else body

        return forward

    return for_function
