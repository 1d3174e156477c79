"""Connection functions: forwarded to where their credentials are (the agent backend).

Each call says which connection it runs on and whose credential that is
(seeds/000, "Connection Tools": "The difference is credential ownership and
runtime identity"): a ``shared`` connection's credential belongs to the team or
organization that shared it; a ``private`` one is the conversation user's own,
so the backend resolves it from ``context.user``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.core.errors import FunctionNotAvailable, ToolNotConfigured
from runtime.core.upstreams import Upstreams
from runtime.functions.base import without_null_optionals
from runtime.tools.adapters.search import call_api
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.settings import ToolSettings


def connection_adapter(settings: ToolSettings, upstreams: Upstreams) -> Callable[[str], Adapter]:
    """Connection functions run where their credentials are: the agent backend.

    ``POST {connections_url}`` with ``{"function", "arguments", "connection":
    {"id", "kind"}, "context"}``; the backend answers ``{"result": ...}``.
    """
    client = upstreams.client("connections")

    def for_function(function: str) -> Adapter:
        def forward(call: ToolCall, arguments: dict[str, Any]) -> Any:
            connection_id, kind = call.connection_id, call.function.connection_kind
            if connection_id is None or kind is None:
                msg = f"{function} is not a connection function ({call.function.source})"
                raise FunctionNotAvailable(msg)
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
                    # Strict models send null for what they leave out (see base.py).
                    "arguments": without_null_optionals(arguments, call.function.parameters),
                    "connection": {"id": connection_id, "kind": kind},
                    "context": call.upstream_context(),
                },
            )
            return body.get("result") if isinstance(body, dict) else body

        return forward

    return for_function
