"""Connection functions: forwarded to where their credentials are (the agent backend)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.config import ToolSettings
from runtime.errors import ToolNotConfigured
from runtime.tools.adapters.search import call_api
from runtime.tools.call import Adapter, ToolCall
from runtime.upstreams import Upstreams


def connection_adapter(settings: ToolSettings, upstreams: Upstreams) -> Callable[[str], Adapter]:
    """Connection functions run where their credentials are: the agent backend.

    ``POST {connections_url}`` with ``{"function", "arguments", "context"}``; the
    backend answers ``{"result": ...}``.
    """
    client = upstreams.client("connections")

    def for_function(function: str) -> Adapter:
        def forward(call: ToolCall, arguments: dict[str, Any]) -> Any:
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
                        "org": call.ctx.org,
                        "user": call.ctx.user,
                        "agentId": call.ctx.agent,
                        "conversationId": call.ctx.conversation,
                    },
                },
            )
            return body.get("result") if isinstance(body, dict) else body

        return forward

    return for_function
