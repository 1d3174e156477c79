"""AgentGateway: how ``callAgent``, ``callAgentsParallel`` and ``run_function_batch``
reach sub-agents. Implementations: ``http.py`` (the agent backend runs them),
``openai.py`` (chat completions, standalone), and ``NoAgentGateway`` below.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Protocol

import httpx

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


def post(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    timeout: float,
    name: str,
) -> httpx.Response:
    """POST within what is left of the deadline; transport failures are ``AgentCallFailed``."""
    if timeout <= 0:
        msg = f"sub-agent {name!r}: no time left before the script's deadline"
        raise AgentCallFailed(msg)
    try:
        return client.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException as exc:
        msg = f"sub-agent {name!r} did not answer within {timeout:.1f} seconds"
        raise AgentCallFailed(msg) from exc
    except httpx.HTTPError as exc:
        msg = f"sub-agent {name!r} could not be reached: {exc}"
        raise AgentCallFailed(msg) from exc


def read_json(response: httpx.Response, name: str) -> dict[str, Any]:
    """The 200 answer's JSON object; anything else is ``AgentCallFailed``."""
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
