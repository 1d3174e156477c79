"""AgentGateway: how ``callAgent``, ``callAgentsParallel`` and ``run_function_batch``
reach sub-agents. Implementations: ``http.py`` (the agent backend runs them),
``openai.py`` (chat completions, standalone), and ``NoAgentGateway`` below.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from runtime.core import tracing
from runtime.core.context import CallContext
from runtime.core.errors import SubAgentNotAllowed


class AgentCallFailed(Exception):
    """A sub-agent call failed; the message is what the script sees."""


class AgentGateway(Protocol):
    def call(self, ctx: CallContext, name: str, prompt: str, timeout: float) -> str:
        """The sub-agent's response text; ``AgentCallFailed`` otherwise."""


def check_allowed(ctx: CallContext, names: Iterable[str]) -> None:
    """Refuse, before anything is called, names that are not the agent's own sub-agents."""
    refused = [name for name in dict.fromkeys(names) if name not in ctx.sub_agents]
    if not refused:
        return
    allowed = ", ".join(ctx.sub_agents) or "none: this agent has no sub-agents configured"
    quoted = ", ".join(repr(name) for name in refused)
    what = "sub-agent" if len(refused) == 1 else "sub-agents"
    verb = "is" if len(refused) == 1 else "are"
    msg = f"{what} {quoted} {verb} not among this agent's sub-agents (allowed: {allowed})"
    raise SubAgentNotAllowed(msg, refused=refused, allowed=list(ctx.sub_agents))


@dataclass(frozen=True)
class Deadline:
    """When a group of calls must be finished (``time.monotonic``), and its name for messages."""

    at: float
    limit: float
    """The seconds it was set to, as the messages state it."""
    name: str

    @classmethod
    def after(cls, seconds: float, name: str) -> Deadline:
        return cls(time.monotonic() + seconds, seconds, name)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def missed(self) -> dict[str, Any]:
        """The slot of a call that was not finished in time."""
        msg = f"not finished within {self.name} of {self.limit:.3g} seconds"
        return {"ok": False, "error": msg, "deadlineExceeded": True}


def call_parallel(
    gateway: AgentGateway,
    ctx: CallContext,
    names: list[str],
    prompts: list[str],
    timeout: float,
    max_parallel: int,
    deadline: Deadline | None = None,
) -> list[dict[str, Any]]:
    """All calls at once (up to ``max_parallel``), results in order; a failure stays in its slot.

    With a ``deadline``, each call gets at most what is left of it when it starts,
    and the answer comes when the deadline passes even if some calls are still
    waiting or running: those slots say they missed it.
    """

    def one(pair: tuple[str, str]) -> dict[str, Any]:
        budget = timeout if deadline is None else min(timeout, deadline.remaining())
        if deadline is not None and budget <= 0:
            return deadline.missed()
        try:
            return {"ok": True, "response": gateway.call(ctx, pair[0], pair[1], budget)}
        except AgentCallFailed as error:
            if deadline is not None and budget < timeout and deadline.remaining() <= 0:
                return deadline.missed()  # cut short by the deadline, not by its own timeout
            return {"ok": False, "error": str(error)}

    pool = concurrent.futures.ThreadPoolExecutor(max(1, min(max_parallel, len(names))))
    try:
        traced = tracing.carry(one)
        futures = [pool.submit(traced, pair) for pair in zip(names, prompts, strict=True)]
        wait = None if deadline is None else max(0.0, deadline.remaining())
        done, _ = concurrent.futures.wait(futures, timeout=wait)
    finally:
        # Calls still running end by themselves (their timeout is within the deadline).
        pool.shutdown(wait=False, cancel_futures=True)
    results = []
    for future in futures:
        if future in done:
            results.append(future.result())
        else:
            assert deadline is not None  # without one, wait() returns when all are done
            results.append(deadline.missed())
    return results


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
