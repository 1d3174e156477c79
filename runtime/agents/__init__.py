"""Sub-agent gateways, chosen by ``SIESTA_AGENTS__GATEWAY__TYPE`` and imported lazily."""

from __future__ import annotations

import httpx

from runtime.agents.base import (
    AgentCallFailed,
    AgentGateway,
    Deadline,
    NoAgentGateway,
    call_parallel,
    check_allowed,
)
from runtime.agents.settings import AgentSettings, HttpGatewaySettings, OpenAIGatewaySettings

__all__ = [
    "AgentCallFailed",
    "AgentGateway",
    "Deadline",
    "NoAgentGateway",
    "build_gateway",
    "call_parallel",
    "check_allowed",
]


def build_gateway(settings: AgentSettings, client: httpx.Client) -> AgentGateway:
    """The configured gateway; its calls go through ``client`` (pooled, replaceable)."""
    gateway = settings.gateway
    if isinstance(gateway, HttpGatewaySettings):
        from runtime.agents.http import HttpAgentGateway

        token = gateway.backend_token.get_secret_value() if gateway.backend_token else None
        return HttpAgentGateway(gateway.backend_url, token, client)
    if isinstance(gateway, OpenAIGatewaySettings):
        from runtime.agents.openai import OpenAIAgentGateway

        return OpenAIAgentGateway(gateway.agents, client)
    return NoAgentGateway()
