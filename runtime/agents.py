"""AgentGateway: how ``callAgent`` / ``callAgentsParallel`` reach sub-agents.

* ``HttpAgentGateway`` asks the agent backend to run the named sub-agent in a
  new private conversation (the backend owns agents, models and credentials).
  Contract: ``POST {backend_url}`` with ``Authorization: Bearer {backend_token}``
  and ``{"agent": name, "prompt": text, "context": {"org", "user",
  "conversationId", "agentId"}}``; a 200 answer is ``{"response": text}``; 404
  means no such sub-agent; other statuses are failures (``{"error": ...}``).
* ``OpenAIAgentGateway`` calls an OpenAI-compatible ``/chat/completions`` for
  sub-agents defined in settings (name, model, system prompt, base URL), for
  standalone use without a backend.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Protocol

import httpx

from runtime.config import AgentSettings, SubAgent
from runtime.context import CallContext


class AgentCallFailed(Exception):
    """A sub-agent call failed; the message is what the script sees."""


class AgentGateway(Protocol):
    def call(self, ctx: CallContext, name: str, prompt: str, timeout: float) -> str:
        """The sub-agent's response text; ``AgentCallFailed`` otherwise."""


def call_parallel(
    gateway: AgentGateway,
    ctx: CallContext,
    names: list[str],
    prompts: list[str],
    timeout: float,
    max_parallel: int,
) -> list[dict[str, Any]]:
    """All calls at once (up to ``max_parallel``), results in order; a failure stays in its slot."""

    def one(pair: tuple[str, str]) -> dict[str, Any]:
        try:
            return {"ok": True, "response": gateway.call(ctx, pair[0], pair[1], timeout)}
        except AgentCallFailed as error:
            return {"ok": False, "error": str(error)}

    with concurrent.futures.ThreadPoolExecutor(max(1, min(max_parallel, len(names)))) as pool:
        return list(pool.map(one, zip(names, prompts, strict=True)))


class NoAgentGateway:
    def call(self, ctx: CallContext, name: str, prompt: str, timeout: float) -> str:
        msg = "no sub-agent gateway is configured in this deployment (SIESTA_AGENTS__GATEWAY)"
        raise AgentCallFailed(msg)


class HttpAgentGateway:
    def __init__(self, url: str, token: str | None) -> None:
        self._url = url
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

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
        response = _post(self._url, body, self._headers, timeout, name)
        if response.status_code == 404:
            msg = f"unknown sub-agent {name!r}"
            raise AgentCallFailed(msg)
        text = _json(response, name).get("response")
        if not isinstance(text, str):
            msg = f"sub-agent {name!r}: the backend's answer has no 'response' text"
            raise AgentCallFailed(msg)
        return text


class OpenAIAgentGateway:
    def __init__(self, agents: list[SubAgent]) -> None:
        self._agents = {agent.name: agent for agent in agents}

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
        response = _post(url, {"model": agent.model, "messages": messages}, headers, timeout, name)
        try:
            content = _json(response, name)["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            msg = f"sub-agent {name!r}: unexpected chat-completions answer"
            raise AgentCallFailed(msg) from exc
        return str(content)


def build_gateway(settings: AgentSettings) -> AgentGateway:
    if settings.gateway == "http" and settings.backend_url:
        token = settings.backend_token.get_secret_value() if settings.backend_token else None
        return HttpAgentGateway(settings.backend_url, token)
    if settings.gateway == "openai":
        return OpenAIAgentGateway(settings.agents)
    return NoAgentGateway()


def _post(
    url: str, body: dict[str, Any], headers: dict[str, str], timeout: float, name: str
) -> httpx.Response:
    if timeout <= 0:
        msg = f"sub-agent {name!r}: no time left before the script's deadline"
        raise AgentCallFailed(msg)
    try:
        return httpx.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException as exc:
        msg = f"sub-agent {name!r} did not answer within {timeout:.1f} seconds"
        raise AgentCallFailed(msg) from exc
    except httpx.HTTPError as exc:
        msg = f"sub-agent {name!r} could not be reached: {exc}"
        raise AgentCallFailed(msg) from exc


def _json(response: httpx.Response, name: str) -> dict[str, Any]:
    if response.status_code != 200:
        msg = f"sub-agent {name!r} failed with HTTP {response.status_code}: {response.text[:300]}"
        raise AgentCallFailed(msg)
    try:
        body = response.json()
    except ValueError as exc:
        msg = f"sub-agent {name!r}: the answer is not JSON"
        raise AgentCallFailed(msg) from exc
    if not isinstance(body, dict):
        msg = f"sub-agent {name!r}: the answer is not a JSON object"
        raise AgentCallFailed(msg)
    return body
