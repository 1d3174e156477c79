"""Sub-agents run by the agent backend, which owns agents, models and credentials.

Contract: ``POST {backend_url}`` with ``Authorization: Bearer {backend_token}``
and ``{"agent": name, "prompt": text, "context": {"org", "user",
"conversationId", "agentId"}}``; a 200 answer is ``{"response": text}``; 404
means no such sub-agent; other statuses are failures.
"""

from __future__ import annotations

import httpx

from runtime.agents.base import AgentCallFailed, post, read_json
from runtime.core.context import CallContext


class HttpAgentGateway:
    def __init__(self, url: str, token: str | None, client: httpx.Client) -> None:
        self._url = url
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = client

    def call(self, ctx: CallContext, name: str, prompt: str, timeout: float) -> str:
        body = {
            "agent": name,
            "prompt": prompt,
            "context": {
                "org": ctx.org,
                "user": ctx.user,
                "conversationId": ctx.conversation,
                "agentId": ctx.agent,
            },
        }
        response = post(self._client, self._url, body, self._headers, timeout, name)
        if response.status_code == 404:
            msg = f"unknown sub-agent {name!r}"
            raise AgentCallFailed(msg)
        text = read_json(response, name).get("response")
        if not isinstance(text, str):
            msg = f"sub-agent {name!r}: the backend's answer has no 'response' text"
            raise AgentCallFailed(msg)
        return text
