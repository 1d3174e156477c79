"""Settings of the sub-agent gateway."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from runtime.core.settings import without


class SubAgent(BaseModel):
    """A sub-agent for the standalone (OpenAI-compatible) gateway."""

    model_config = ConfigDict(extra="forbid")

    name: str
    model: str
    system_prompt: str = ""
    base_url: str
    api_key: SecretStr | None = None


class NoGatewaySettings(BaseModel):
    """No sub-agents: ``callAgent`` fails with a message that says so."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["none"] = "none"


class HttpGatewaySettings(BaseModel):
    """The agent backend runs sub-agents (it owns agents, models and credentials)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["http"] = "http"
    backend_url: str = Field(pattern=r"^https?://")
    """The backend's endpoint for sub-agent calls (required)."""
    backend_token: SecretStr | None = None


class OpenAIGatewaySettings(BaseModel):
    """Sub-agents defined here, reached through OpenAI-compatible chat completions."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["openai"] = "openai"
    agents: list[SubAgent] = Field(min_length=1)
    """The sub-agents (required, at least one)."""


GatewaySettings = Annotated[
    NoGatewaySettings | HttpGatewaySettings | OpenAIGatewaySettings,
    Field(discriminator="type"),
]


_GATEWAY_FIELDS = ("backend_url", "backend_token", "agents")


class AgentSettings(BaseModel):
    """How ``callAgent`` reaches sub-agents."""

    model_config = ConfigDict(extra="forbid")

    gateway: GatewaySettings = Field(default_factory=NoGatewaySettings)
    """``SIESTA_AGENTS__GATEWAY__TYPE``: ``none``, ``http`` (the agent backend) or
    ``openai`` (chat completions), with that gateway's own settings beside it."""
    timeout_seconds: float = Field(120.0, gt=0)
    """Longest one sub-agent call may take (also bounded by the script's deadline)."""
    max_parallel: int = Field(8, ge=1)
    """Concurrent calls of one ``callAgentsParallel``."""

    @model_validator(mode="before")
    @classmethod
    def _flat_gateway(cls, data: Any) -> Any:
        """The short form ``SIESTA_AGENTS__GATEWAY=http`` with ``SIESTA_AGENTS__BACKEND_URL``
        (and ``__BACKEND_TOKEN`` / ``__AGENTS``) beside it means the nested one."""
        if not isinstance(data, dict) or not isinstance(data.get("gateway"), str):
            return data
        gateway = {"type": data["gateway"]}
        gateway.update({k: data[k] for k in _GATEWAY_FIELDS if k in data})
        return {**without(data, "gateway", *_GATEWAY_FIELDS), "gateway": gateway}
