"""Both sub-agent gateways against a real local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from runtime.agents import AgentCallFailed, NoAgentGateway, call_parallel
from runtime.agents.http import HttpAgentGateway
from runtime.agents.openai import OpenAIAgentGateway
from runtime.config import SubAgent
from runtime.context import CallContext
from tests.agent_server import AgentServer

CTX = CallContext("org", "user", "conv", agent="main-agent")
CLIENT = httpx.Client()


@pytest.fixture(scope="module")
def server() -> Iterator[AgentServer]:
    running = AgentServer()
    yield running
    running.stop()


def gateways(server: AgentServer) -> list[HttpAgentGateway | OpenAIAgentGateway]:
    agents = [
        SubAgent(name=name, model=name, system_prompt="be brief", base_url=f"{server.url}/v1")
        for name in ("echo", "slow", "hang", "fail")
    ]
    return [
        HttpAgentGateway(f"{server.url}/subagents", "tok", CLIENT),
        OpenAIAgentGateway(agents, CLIENT),
    ]


@pytest.mark.parametrize("index", [0, 1], ids=["backend", "openai"])
def test_answers_errors_and_timeouts(server: AgentServer, index: int) -> None:
    gateway = gateways(server)[index]
    answer = gateway.call(CTX, "echo", "hi", timeout=5)
    assert answer.startswith("echo: ") and answer.endswith("hi")
    with pytest.raises(AgentCallFailed, match="unknown sub-agent 'nobody'"):
        gateway.call(CTX, "nobody", "hi", timeout=5)
    with pytest.raises(AgentCallFailed, match="HTTP 500"):
        gateway.call(CTX, "fail", "hi", timeout=5)
    with pytest.raises(AgentCallFailed, match=r"did not answer within 0\.5 seconds"):
        gateway.call(CTX, "hang", "hi", timeout=0.5)


def test_the_backend_gets_the_context_and_the_token(server: AgentServer) -> None:
    HttpAgentGateway(f"{server.url}/subagents", "tok", CLIENT).call(CTX, "echo", "hello", timeout=5)
    request = server.requests[-1]
    assert request["headers"]["authorization"] == "Bearer tok"
    assert request["body"] == {
        "agent": "echo",
        "prompt": "hello",
        "context": {
            "org": "org",
            "user": "user",
            "conversationId": "conv",
            "agentId": "main-agent",
        },
    }


def test_openai_gateway_sends_the_system_prompt(server: AgentServer) -> None:
    answer = gateways(server)[1].call(CTX, "echo", "question", timeout=5)
    assert answer == "echo: be brief | question"


def test_parallel_calls_keep_order_and_failures_in_their_slot(server: AgentServer) -> None:
    server.max_in_flight = 0
    results = call_parallel(
        gateways(server)[0],
        CTX,
        ["slow", "nobody", "slow", "echo"],
        ["1", "2", "3", "4"],
        timeout=5,
        max_parallel=4,
    )
    assert server.max_in_flight >= 2  # the two slow calls overlapped
    assert [r["ok"] for r in results] == [True, False, True, True]
    assert results[0]["response"] == "slow: 1" and results[3]["response"] == "echo: 4"


def test_without_a_gateway_the_error_says_so() -> None:
    with pytest.raises(AgentCallFailed, match="no sub-agent gateway is configured"):
        NoAgentGateway().call(CTX, "x", "y", timeout=1)
