"""A frozen agent costs one call, after ``SIESTA_SANDBOX__CHANNEL_STALL_SECONDS``, never a
hang: a send it does not take, or a file operation it does not answer, gives the channel
up with ``sandbox_unavailable`` naming the limit; the next call opens a new channel.
A silent command is not a stall: commands are bounded by their own timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

import pytest

from runtime.core.errors import SandboxUnavailable
from runtime.providers.agent.channel import AgentChannel
from runtime.providers.agent.channels import AgentChannels, pinged_channel
from runtime.providers.agent.inside import AgentInside
from runtime.providers.agent.protocol import Frame, FrameType
from runtime.seams.providers import ExecRequest
from tests.runtime.providers.fake_agent import FakeAgent, exit_frame, pong, well_behaved

STALL = 0.5


class Frozen:
    """An agent that answers pings, then freezes at the first SPAWN: it neither reads
    nor answers any more (a container paused by hand mid-call)."""

    def __init__(self) -> None:
        self.thawed = threading.Event()

    def __call__(self, frame: Frame) -> Iterable[bytes]:
        if frame.type is FrameType.PING:
            return [pong(frame.id)]
        if frame.type is FrameType.SPAWN:
            self.thawed.wait(30)  # stops reading its stdin, as a frozen process does
        return []


class Sandbox:
    def __init__(self, first: object) -> None:
        self.agents: list[FakeAgent] = []
        self._answers = [first]
        self.inside = AgentInside(AgentChannels(self._open))

    def _open(self, name: str) -> AgentChannel:
        answer = self._answers.pop(0) if self._answers else well_behaved
        agent = FakeAgent(answer)  # type: ignore[arg-type]
        self.agents.append(agent)
        return pinged_channel(agent.transport(), name, STALL)


@pytest.fixture
def frozen() -> Iterator[tuple[Sandbox, Frozen]]:
    agent = Frozen()
    sandbox = Sandbox(agent)
    yield sandbox, agent
    agent.thawed.set()
    for fake in sandbox.agents:
        fake.close()


def test_a_write_the_agent_does_not_take_fails_after_the_stall_limit(
    frozen: tuple[Sandbox, Frozen],
) -> None:
    sandbox, _ = frozen
    started = time.monotonic()
    with pytest.raises(SandboxUnavailable) as raised:
        sandbox.inside.write_file("s", "big.bin", [bytes(8 * 1024 * 1024)], 16 * 1024 * 1024)
    elapsed = time.monotonic() - started

    assert STALL <= elapsed < STALL + 5
    assert raised.value.fields["limit"] == STALL
    assert "SIESTA_SANDBOX__CHANNEL_STALL_SECONDS" in raised.value.message
    after = sandbox.inside.exec("s", ExecRequest("true", 10, 1024, 1))  # a new channel
    assert after.exit_code == 0 and len(sandbox.agents) == 2


def test_a_file_operation_the_agent_does_not_answer_fails_after_the_stall_limit(
    frozen: tuple[Sandbox, Frozen],
) -> None:
    sandbox, _ = frozen
    started = time.monotonic()
    with pytest.raises(SandboxUnavailable) as raised:
        sandbox.inside.list_dir("s", ".", 10)
    elapsed = time.monotonic() - started

    assert STALL <= elapsed < STALL + 5
    assert raised.value.fields["limit"] == STALL


def test_a_command_silent_for_longer_than_the_stall_limit_is_no_stall() -> None:
    def slow(frame: Frame) -> Iterable[bytes]:
        if frame.type is FrameType.PING:
            return [pong(frame.id)]
        if frame.type is FrameType.SPAWN:
            time.sleep(STALL * 3)  # thinking quietly, still reading
            return [exit_frame(frame.id, 0, b"done")]
        return []

    sandbox = Sandbox(slow)
    try:
        result = sandbox.inside.exec("s", ExecRequest("sleep 2", 10, 1024, 1))
    finally:
        for fake in sandbox.agents:
            fake.close()
    assert result.exit_code == 0 and result.stdout.text == "done"
