"""Sub-agents defined in settings (name, model, system prompt, base URL), reached
through an OpenAI-compatible ``/chat/completions``: standalone use without a backend."""

from __future__ import annotations

import httpx

from runtime.agents.base import AgentCallFailed, post, read_json
from runtime.agents.settings import SubAgent
from runtime.core.context import CallContext


class OpenAIAgentGateway:
    def __init__(self, agents: list[SubAgent], client: httpx.Client) -> None:
        self._agents = {agent.name: agent for agent in agents}
        self._client = client

    def call(self, ctx: CallContext, name: str, prompt: str, timeout: float) -> str:
        agent = self._agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self._agents)) or "none"
            msg = f"unknown sub-agent {name!r} (configured: {known})"
            raise AgentCallFailed(msg)
        messages = [{"role": "user", "content": prompt}]
        if agent.system_prompt:
            messages.insert(0, {"role": "system", "content": agent.system_prompt})
        headers = (
            {"Authorization": f"Bearer {agent.api_key.get_secret_value()}"} if agent.api_key else {}
        )
        url = agent.base_url.rstrip("/") + "/chat/completions"
        body = {"model": agent.model, "messages": messages}
        answer = read_json(post(self._client, url, body, headers, timeout, name), name)
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            msg = f"sub-agent {name!r}: unexpected chat-completions answer"
            raise AgentCallFailed(msg) from exc
        return str(content)
