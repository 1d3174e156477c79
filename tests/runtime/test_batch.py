"""run_function_batch against a real local agent backend: the sub-agent allowlist
and the one deadline of the whole batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from runtime.agents.http import HttpAgentGateway
from runtime.agents.settings import AgentSettings
from runtime.core.errors import SubAgentNotAllowed
from runtime.tools.adapters.system import batch_adapter
from runtime.tools.settings import ToolSettings
from tests.agent_server import AgentServer
from tests.helpers import tool_call

CLIENT = httpx.Client()
DEADLINE = 1.5


@pytest.fixture(scope="module")
def server() -> Iterator[AgentServer]:
    running = AgentServer()
    yield running
    running.stop()


def batch(server: AgentServer, sub_agents: list[str], arguments: dict[str, Any]) -> Any:
    adapter = batch_adapter(
        HttpAgentGateway(f"{server.url}/subagents", "tok", CLIENT),
        AgentSettings(timeout_seconds=30),
        ToolSettings(batch_deadline_seconds=DEADLINE, max_batch_parallel=2),
    )
    call = tool_call("run_function_batch", agent={"subAgents": sub_agents})
    return adapter(call, arguments)


def test_a_configured_sub_agent_answers_every_input(server: AgentServer) -> None:
    result = batch(server, ["echo"], {"functionName": "echo", "input": ["a", "b"]})
    assert [item["response"] for item in result["results"]] == ["echo: a", "echo: b"]
    assert (result["failed"], result["unfinished"]) == (0, 0)
    assert result["deadlineSeconds"] == DEADLINE


@pytest.mark.parametrize(
    ("sub_agents", "name", "allowed"),
    [
        (["echo"], "slow", "echo"),
        (["echo", "slow"], "ECHO", "echo, slow"),
        ([], "echo", "none: this agent has no sub-agents configured"),
    ],
)
def test_other_names_are_refused_before_any_call(
    server: AgentServer, sub_agents: list[str], name: str, allowed: str
) -> None:
    before = len(server.requests)
    with pytest.raises(SubAgentNotAllowed) as caught:
        batch(server, sub_agents, {"functionName": name, "input": ["a", "b"]})
    assert caught.value.code == "sub_agent_not_allowed"
    assert f"(allowed: {allowed})" in caught.value.message
    assert len(server.requests) == before  # the gateway got nothing


def test_the_batch_answers_at_its_deadline_with_the_rest_reported_failed(
    server: AgentServer,
) -> None:
    # Two at a time, 1 s each: inputs 1-2 finish at 1 s, 3-4 are cut at 1.5 s,
    # 5-6 never start. Without the batch deadline this takes 3 s.
    started = time.monotonic()
    result = batch(server, ["slow"], {"functionName": "slow", "input": list("123456")})
    elapsed = time.monotonic() - started
    assert DEADLINE <= elapsed < DEADLINE + 0.5
    assert [item["ok"] for item in result["results"]] == [True, True, False, False, False, False]
    assert (result["failed"], result["unfinished"]) == (4, 4)
    for item in result["results"][2:]:
        assert item["error"] == (
            "not finished within the batch deadline (SIESTA_TOOLS__BATCH_DEADLINE_SECONDS) "
            "of 1.5 seconds"
        )
        assert item["deadlineExceeded"] is True


def test_a_call_that_never_answers_cannot_hold_the_batch(server: AgentServer) -> None:
    started = time.monotonic()
    result = batch(server, ["hang", "echo"], {"functionName": "hang", "input": ["x"]})
    assert time.monotonic() - started < DEADLINE + 0.5
    assert result["unfinished"] == 1
