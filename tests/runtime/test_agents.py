"""Both sub-agent gateways against a real local HTTP server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from runtime.agents import AgentCallFailed, Deadline, NoAgentGateway, call_parallel, check_allowed
from runtime.agents.http import HttpAgentGateway
from runtime.agents.openai import OpenAIAgentGateway
from runtime.agents.settings import SubAgent
from runtime.core.context import CallContext
from runtime.core.errors import SubAgentNotAllowed
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


@pytest.mark.parametrize(
    ("configured", "names", "refused", "message"),
    [
        (("echo", "slow"), ["echo"], None, None),
        (("echo", "slow"), ["slow", "echo", "slow"], None, None),
        (
            ("echo", "slow"),
            ["echo", "other"],
            ["other"],
            "sub-agent 'other' is not among this agent's sub-agents (allowed: echo, slow)",
        ),
        (
            ("echo",),
            ["x", "Echo", "x"],
            ["x", "Echo"],
            "sub-agents 'x', 'Echo' are not among this agent's sub-agents (allowed: echo)",
        ),
        (
            (),
            ["echo"],
            ["echo"],
            "sub-agent 'echo' is not among this agent's sub-agents "
            "(allowed: none: this agent has no sub-agents configured)",
        ),
    ],
)
def test_only_the_agents_own_sub_agents_are_allowed(
    configured: tuple[str, ...], names: list[str], refused: list[str] | None, message: str | None
) -> None:
    ctx = CallContext("org", "user", "conv", sub_agents=configured)
    if refused is None:
        check_allowed(ctx, names)
        return
    with pytest.raises(SubAgentNotAllowed) as caught:
        check_allowed(ctx, names)
    assert caught.value.code == "sub_agent_not_allowed"
    assert caught.value.message == message
    assert caught.value.fields == {"refused": refused, "allowed": list(configured)}


def test_a_deadline_cuts_waiting_and_running_calls_and_answers_on_time(
    server: AgentServer,
) -> None:
    gateway = gateways(server)[0]
    started = time.monotonic()
    results = call_parallel(
        gateway,
        CTX,
        ["echo", "hang", "slow", "slow", "slow"],
        ["1", "2", "3", "4", "5"],
        timeout=30,
        max_parallel=2,  # echo, then slow 3 (1 s), then slow 4 (cut at 1.5 s), 5 never starts
        deadline=Deadline.after(1.5, "the test deadline"),
    )
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 2.0
    assert [r["ok"] for r in results] == [True, False, True, False, False]
    for cut in (results[1], results[3], results[4]):
        assert cut == {
            "ok": False,
            "error": "not finished within the test deadline of 1.5 seconds",
            "deadlineExceeded": True,
        }
