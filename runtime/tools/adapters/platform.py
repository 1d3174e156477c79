"""Platform_* functions: validated here as the reference says, then forwarded to the
platform API (``POST {platform_base_url}/functions/{name}`` with the arguments and
the caller's context; the platform answers ``{"result": ...}`` or an error).

Platform_CreateTask's rules: ``summary`` required; ``prompt`` defaults to "";
``status`` is Todo, InProgress, Review or Done (default Todo);
``assignedChatBotId`` must be a UUID; a name that matches several agents asks for
the id; an id and a name that point to different agents fail.
Platform_UpdateAgent: arrays that are given replace the whole list.
"""

from __future__ import annotations

from typing import Any

from runtime.config import ToolSettings
from runtime.errors import InvalidArguments, ToolNotConfigured
from runtime.functions.base import parse_arguments as parse
from runtime.functions.platform import PLATFORM, CreateTaskArgs, UpdateAgentArgs
from runtime.tools.adapters.search import call_api
from runtime.tools.call import Adapter, ToolCall
from runtime.upstreams import Upstreams


def platform_adapters(settings: ToolSettings, upstreams: Upstreams) -> dict[str, Adapter]:
    client = upstreams.client("platform")

    def forward(name: str, call: ToolCall, arguments: dict[str, Any]) -> Any:
        if not settings.platform_base_url:
            msg = f"{name} needs SIESTA_TOOLS__PLATFORM_BASE_URL"
            raise ToolNotConfigured(msg)
        token = settings.platform_token.get_secret_value() if settings.platform_token else ""
        body = call_api(
            client,
            "POST",
            f"{settings.platform_base_url}/functions/{name}",
            "the platform API",
            headers={"Authorization": f"Bearer {token}"} if token else {},
            json={
                "arguments": arguments,
                "context": {
                    "org": call.ctx.org,
                    "user": call.ctx.user,
                    "agentId": call.ctx.agent,
                    "conversationId": call.ctx.conversation,
                },
            },
        )
        return body.get("result") if isinstance(body, dict) else body

    def agents_named(call: ToolCall, name: str) -> list[dict[str, Any]]:
        found = forward("Platform_ListAgents", call, {"search": name, "limit": 50})
        return [a for a in found or [] if isinstance(a, dict) and a.get("name") == name]

    def create_task(call: ToolCall, arguments: dict[str, Any]) -> Any:
        args = parse(CreateTaskArgs, "Platform_CreateTask", arguments)
        if args.assignedChatBotName:
            matches = agents_named(call, args.assignedChatBotName)
            if not matches:
                msg = f"no accessible agent is named {args.assignedChatBotName!r}"
                raise InvalidArguments(msg)
            if len(matches) > 1 and not args.assignedChatBotId:
                msg = (
                    f"{len(matches)} agents are named {args.assignedChatBotName!r}; "
                    "give assignedChatBotId to choose one"
                )
                raise InvalidArguments(msg)
            ids = {str(a.get("id")) for a in matches}
            if args.assignedChatBotId and args.assignedChatBotId not in ids:
                msg = "assignedChatBotId and assignedChatBotName refer to different agents"
                raise InvalidArguments(msg)
            if not args.assignedChatBotId:
                args.assignedChatBotId = ids.pop()
        return forward("Platform_CreateTask", call, args.model_dump(exclude_none=True))

    def update_agent(call: ToolCall, arguments: dict[str, Any]) -> Any:
        args = parse(UpdateAgentArgs, "Platform_UpdateAgent", arguments)
        body = args.model_dump(exclude_none=True)
        body["replaceLists"] = sorted(k for k, v in body.items() if isinstance(v, list))
        return forward("Platform_UpdateAgent", call, body)

    def generic(name: str) -> Adapter:
        def run(call: ToolCall, arguments: dict[str, Any]) -> Any:
            spec = specs[name]
            return forward(name, call, spec.parse(arguments).model_dump(exclude_none=True))

        return run

    specs = {spec.name: spec for spec in PLATFORM}
    adapters = {spec.name: generic(spec.name) for spec in PLATFORM}
    adapters["Platform_CreateTask"] = create_task
    adapters["Platform_UpdateAgent"] = update_agent
    return adapters
