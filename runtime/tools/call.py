"""One call of an agent function, as an adapter receives it.

Adapters get the whole call, not only the conversation: who the agent is (its
connections, sub-agents, task workspace), who the user is, and which catalog
entry they are running (a connection function's source says whose credential
it uses). ``events`` carries what a streaming caller wants to see while the
call runs; a call run later, after an approval, has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from siesta_contract.agents import AgentConfig, UserInfo

from runtime.core.cancellation import Cancellation
from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.tools.catalog import CatalogFunction


@dataclass(frozen=True)
class CallEvents:
    """Callbacks of a caller that streams (all optional; called on worker threads)."""

    status: Callable[[str], None] | None = None
    """``logStatus`` messages of a script, as they happen."""
    output: Callable[[str, bytes], None] | None = None
    """A command's output chunks (``stdout``/``stderr``), as they come."""
    cancellation: Cancellation | None = None
    """Set when the caller went away: the call stops."""


@dataclass(frozen=True)
class ToolCall:
    ctx: CallContext
    agent: AgentConfig
    user: UserInfo
    function: CatalogFunction
    events: CallEvents = field(default_factory=CallEvents)
    timeout_seconds: float | None = None
    """A wall-clock limit the direct route's caller set (``/js``'s ``timeoutSeconds``),
    capped by the deployment's; not an argument of the function."""

    def upstream_context(self) -> dict[str, Any]:
        """Who is calling, as forwarded to the platform API and the connection gateway."""
        return {
            "org": self.ctx.org,
            "user": self.ctx.user,
            "agentId": self.ctx.agent,
            "conversationId": self.ctx.conversation,
        }

    @property
    def connection_id(self) -> str | None:
        """The connection a connection function belongs to (``None`` for System Tools)."""
        source = self.function.source
        return source.removeprefix("connection:") if source.startswith("connection:") else None


Adapter = Callable[[ToolCall, dict[str, Any]], Any]


class FailedWithResult(SiestaError):
    """A call that failed but has a result worth reading: a script's logs and
    statuses up to its error. The log and ``/v1/tools/execute`` show the error
    (with the other fields beside it); the direct ``/js`` route answers the result."""

    def __init__(self, result: dict[str, Any]) -> None:
        error = result["error"]
        others = {key: value for key, value in result.items() if key != "error"}
        super().__init__(error["message"], code=error["code"], **others)
        self.result = result


def agent_context(
    org: str,
    conversation: str,
    agent: AgentConfig,
    user: UserInfo,
    message: str | None = None,
) -> CallContext:
    """The conversation context of a call made through the catalog (``message``: the
    assistant message it belongs to)."""
    return CallContext(
        org,
        user.id,
        conversation,
        agent=agent.id,
        base_image=agent.base_image,
        egress_allow=tuple(agent.egress_allow) if agent.egress_allow is not None else None,
        sub_agents=tuple(agent.sub_agents),
        message=message,
    )


def direct_agent(ctx: CallContext) -> AgentConfig:
    """What a direct route knows of the agent: its headers."""
    return AgentConfig.model_validate(
        {
            "id": ctx.agent or DIRECT_AGENT,
            "baseImage": ctx.base_image,
            "egressAllow": list(ctx.egress_allow) if ctx.egress_allow is not None else None,
            "subAgents": list(ctx.sub_agents),
        }
    )


DIRECT_AGENT = "-"
"""The agent id logged for a direct call that named none (``X-Siesta-Agent``)."""
