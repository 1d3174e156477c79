"""Platform_* functions: validated here as the reference says, then forwarded to the
platform API (``POST {platform_base_url}/functions/{name}`` with the arguments and
the caller's context; the platform answers ``{"result": ...}`` or an error).

Platform_CreateTask's rules: ``summary`` required; ``prompt`` defaults to "";
``status`` is Todo, InProgress, Review or Done (default Todo);
``assignedChatBotId`` must be a UUID; a name that matches several agents asks for
the id; an id and a name that point to different agents fail. The task goes to
the agent's task workspace (``context.taskWorkspaceId``), and the result is the
reference's: task id, summary, status and an "Open task" button built here.
Platform_GetAgent and Platform_UpdateAgent: an omitted id or ``self`` is the
current agent. Update functions forward only the fields given, so only those
change; arrays that are given replace the whole list.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pydantic import BaseModel

from siesta_contract.functions.platform import (
    SELF,
    AgentIdArgs,
    CreateTaskArgs,
    CreateTaskResult,
    TaskButton,
    UpdateAgentArgs,
)

from runtime.core.errors import InvalidArguments, ProviderFailed, ToolNotConfigured
from runtime.core.upstreams import Upstreams
from runtime.functions.base import parse_arguments as parse
from runtime.functions.platform import PLATFORM
from runtime.tools.adapters.search import call_api
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.settings import ToolSettings

UPDATES = frozenset(
    {"Platform_UpdateSkill", "Platform_UpdateMemoryCollection", "Platform_UpdateMemoryPage"}
)
"""Generic functions whose forwarded body must hold only the fields given."""


def platform_adapters(settings: ToolSettings, upstreams: Upstreams) -> dict[str, Adapter]:
    client = upstreams.client("platform")

    def forward(name: str, call: ToolCall, arguments: dict[str, Any], **context: str | None) -> Any:
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
                "context": {**call.upstream_context(), **context},
            },
        )
        return body.get("result") if isinstance(body, dict) else body

    def agents_named(call: ToolCall, name: str) -> list[dict[str, Any]]:
        found = forward("Platform_ListAgents", call, {"search": name, "limit": 50})
        return [a for a in found or [] if isinstance(a, dict) and a.get("name") == name]

    def create_task(call: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        args = parse(CreateTaskArgs, "Platform_CreateTask", arguments)
        workspace = call.agent.task_workspace_id
        if not workspace:
            msg = "Platform_CreateTask needs the agent's taskWorkspaceId"
            raise ToolNotConfigured(msg)
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
        created = forward(
            "Platform_CreateTask",
            call,
            args.model_dump(exclude_none=True),
            taskWorkspaceId=workspace,
        )
        return task_result(args, created)

    def task_result(args: CreateTaskArgs, created: Any) -> dict[str, Any]:
        answer = created if isinstance(created, dict) else {}
        task_id = answer.get("taskId") or answer.get("id")
        if isinstance(task_id, bool) or not isinstance(task_id, str | int) or task_id == "":
            msg = "the platform API created a task but answered without its id"
            raise ProviderFailed(msg)
        status = answer.get("status")  # auto-execution may already have started it
        result = CreateTaskResult(
            taskId=str(task_id),
            summary=args.summary,
            status=status if isinstance(status, str) and status else args.status,
            button=TaskButton(url=task_url(str(task_id))),
        )
        return result.model_dump()

    def task_url(task_id: str) -> str:
        app = (settings.platform_app_url or "").rstrip("/")
        return f"{app}/tasks/{quote(task_id, safe='')}"

    def current_agent(call: ToolCall, given: str | None, name: str) -> str:
        if given is not None and given != SELF:
            return given
        if not call.ctx.agent:
            msg = f"{name}: give an id; this call names no current agent"
            raise InvalidArguments(msg)
        return call.ctx.agent

    def get_agent(call: ToolCall, arguments: dict[str, Any]) -> Any:
        args = parse(AgentIdArgs, "Platform_GetAgent", arguments)
        agent = current_agent(call, args.id, "Platform_GetAgent")
        return forward("Platform_GetAgent", call, {"id": agent})

    def update_agent(call: ToolCall, arguments: dict[str, Any]) -> Any:
        args = parse(UpdateAgentArgs, "Platform_UpdateAgent", arguments)
        body = given_fields(args)
        body["id"] = current_agent(call, args.id, "Platform_UpdateAgent")
        body["replaceLists"] = sorted(k for k, v in body.items() if isinstance(v, list))
        return forward("Platform_UpdateAgent", call, body)

    def generic(name: str) -> Adapter:
        def run(call: ToolCall, arguments: dict[str, Any]) -> Any:
            args = specs[name].parse(arguments)
            body = given_fields(args) if name in UPDATES else args.model_dump(exclude_none=True)
            return forward(name, call, body)

        return run

    specs = {spec.name: spec for spec in PLATFORM}
    adapters = {spec.name: generic(spec.name) for spec in PLATFORM}
    adapters["Platform_CreateTask"] = create_task
    adapters["Platform_GetAgent"] = get_agent
    adapters["Platform_UpdateAgent"] = update_agent
    return adapters


def given_fields(args: BaseModel) -> dict[str, Any]:
    """Only what the caller gave: an omitted field (or ``null``) is not sent, so the
    platform leaves it as it is."""
    return args.model_dump(exclude_unset=True, exclude_none=True)
