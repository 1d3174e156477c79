"""An agent that speaks garbage: the channel closes, nothing else does.

Each case runs a real ``AgentChannels`` (the provider's set of open channels)
against a fake agent on a socket pair: the call in flight fails with
``sandbox_unavailable`` at once, the breach is counted in
``siesta_agent_protocol_errors_total`` by its reason, the service hangs up on
that agent, and the next call opens a new channel that works. Memory stays
bounded whatever the agent sends.
"""

from __future__ import annotations

import secrets
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator

import pytest

from runtime.core.errors import SandboxUnavailable
from runtime.core.metrics import REGISTRY
from runtime.providers.agent import ops as agent_ops
from runtime.providers.agent.channel import (
    STRAY_BUDGET,
    AgentChannel,
    ChannelClosed,
)
from runtime.providers.agent.channels import AgentChannels, pinged_channel
from runtime.providers.agent.inbox import INBOX_BYTES
from runtime.providers.agent.inside import AgentInside
from runtime.providers.agent.protocol import MAX_PAYLOAD, FrameType, encode
from runtime.providers.docker.channels import DockerStreamFrames
from runtime.seams.providers import ExecRequest
from tests.runtime.providers.fake_agent import (
    HANG_UP,
    Answer,
    FakeAgent,
    answering_spawn,
    exit_frame,
    exit_payload,
    out_frame,
    pong,
    raw_frame,
    well_behaved,
)

MiB = 1024 * 1024
QUICKLY = 5.0
"""Seconds within which a broken channel fails its call (the command's own
timeout is far longer)."""
CAP = 4096


def errors(reason: str) -> float:
    value = REGISTRY.get_sample_value("siesta_agent_protocol_errors_total", {"reason": reason})
    return value or 0.0


def request(command: str = "true") -> ExecRequest:
    return ExecRequest(command, timeout_seconds=120, kill_grace_seconds=1, max_output_bytes=CAP)


class Sandbox:
    """A sandbox whose agent answers as told: the first channel gets ``first``, every
    later one a well-behaved agent."""

    def __init__(self, first: Answer) -> None:
        self.agents: list[FakeAgent] = []
        self._answers = [first]
        self.channels = AgentChannels(self._open)

    def _open(self, name: str) -> AgentChannel:
        agent = FakeAgent(self._answers.pop(0) if self._answers else well_behaved)
        self.agents.append(agent)
        return pinged_channel(agent.transport(), name)

    def close(self) -> None:
        self.channels.close()
        for agent in self.agents:
            agent.close()


@pytest.fixture
def sandbox_with() -> Iterator[Callable[[Answer], Sandbox]]:
    made: list[Sandbox] = []

    def make(first: Answer) -> Sandbox:
        made.append(Sandbox(first))
        return made[-1]

    yield make
    for sandbox in made:
        sandbox.close()


def unknown_ids(frame_bytes: int, total: int) -> Iterator[bytes]:
    """Frames of ``frame_bytes`` bytes for ids nobody sent, ``total`` bytes of them,
    in batches (one send each)."""
    frame = encode(FrameType.OUT, secrets.randbits(63), b"\x01" + bytes(frame_bytes - 14))
    per_batch = max(1, MiB // len(frame))
    batch = frame * per_batch
    for _ in range(total // len(batch) + 1):
        yield batch


GARBAGE: dict[str, tuple[str, Callable[[int], Iterable[bytes]]]] = {
    "oversized frame": ("frame_length", lambda rid: [raw_frame(MAX_PAYLOAD + 10, 11, rid)]),
    "4 GiB frame": ("frame_length", lambda rid: [raw_frame(2**32 - 1, 10, rid)]),
    "frame shorter than its header": ("frame_length", lambda rid: [raw_frame(3, 11, rid)]),
    "unknown type": ("frame_type", lambda rid: [raw_frame(9, 99, rid)]),
    "a service's frame type": ("frame_type", lambda rid: [encode(FrameType.SPAWN, rid)]),
    "plain text": ("frame_length", lambda rid: [b"garbage\n" * 10]),
    "cut EXIT payload": (
        "payload",
        lambda rid: [encode(FrameType.EXIT, rid, exit_payload()[:20])],
    ),
    "EXIT whose string runs past its end": (
        "payload",
        lambda rid: [encode(FrameType.EXIT, rid, struct.pack("<iBIQI", 0, 0, 1, 5, 2**31))],
    ),
    "ERROR without its message": ("payload", lambda rid: [encode(FrameType.ERROR, rid, b"\0")]),
    "OUT for stream 7": ("payload", lambda rid: [encode(FrameType.OUT, rid, b"\x07data")]),
    "empty OUT": ("payload", lambda rid: [encode(FrameType.OUT, rid)]),
    "short PONG": ("payload", lambda rid: [encode(FrameType.PONG, rid, b"\1")]),
    "stream ends inside a frame": ("truncated", lambda rid: [exit_frame(rid)[:30], HANG_UP]),
    "stream ends inside a header": ("truncated", lambda rid: [exit_frame(rid)[:7], HANG_UP]),
    "PONG answering a SPAWN": ("unexpected", lambda rid: [pong(rid)]),
    "output past the cap": (
        "output_over_limit",
        lambda rid: [out_frame(rid, bytes(CAP)), out_frame(rid, b"!")],
    ),
    "flood of big frames for unknown ids": (
        "stray_flood",
        lambda rid: unknown_ids(MAX_PAYLOAD, STRAY_BUDGET + 8 * MiB),
    ),
    "flood of tiny frames for unknown ids": (
        "stray_flood",
        lambda rid: unknown_ids(14, STRAY_BUDGET // 512 * 14 + MiB),
    ),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_garbage_closes_the_channel_and_the_next_call_reattaches(
    sandbox_with: Callable[[Answer], Sandbox], case: str
) -> None:
    reason, misbehave = GARBAGE[case]
    sandbox = sandbox_with(answering_spawn(misbehave))
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    before = errors(reason)

    started = time.monotonic()
    with pytest.raises(SandboxUnavailable, match="broke the protocol"):
        agent_ops.command(channel, request())
    assert time.monotonic() - started < QUICKLY
    assert errors(reason) == before + 1
    assert channel.closed
    # The service hung up on that agent (an attach nobody reads would stall it).
    assert sandbox.agents[0].hung_up.wait(QUICKLY)

    again = sandbox.channels.get("sandbox")
    assert again is not None and again is not channel
    result = agent_ops.command(again, request("echo fine"))
    assert (result.exit_code, result.stdout.text) == (0, "bash -lc echo fine")
    assert len(sandbox.agents) == 2


def test_a_call_already_waiting_fails_when_the_agent_breaks_later(
    sandbox_with: Callable[[Answer], Sandbox],
) -> None:
    go = threading.Event()

    def later(request_id: int) -> Iterator[bytes]:
        go.wait(QUICKLY)
        yield out_frame(request_id, b"partial output")
        yield raw_frame(9, 42, request_id)

    sandbox = sandbox_with(answering_spawn(later))
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    seen: list[bytes] = []
    failure: list[BaseException] = []

    def call() -> None:
        try:
            channel.spawn(["sleep", "1000"], on_output=lambda _, chunk: seen.append(chunk))
        except ChannelClosed as exc:
            failure.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.2)
    go.set()
    caller.join(QUICKLY)
    assert not caller.is_alive()
    assert seen == [b"partial output"]
    assert "frame type 42" in str(failure[0])


def test_a_helper_that_says_too_much_closes_the_channel(
    sandbox_with: Callable[[Answer], Sandbox],
) -> None:
    def listing(request_id: int) -> Iterator[bytes]:
        for _ in range(40):
            yield out_frame(request_id, b"f 1 " + b"x" * 200 + b"\0" * 100)
        yield exit_frame(request_id)

    sandbox = sandbox_with(answering_spawn(listing))
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    before = errors("output_over_limit")
    files = AgentInside(sandbox.channels)
    with pytest.raises(SandboxUnavailable, match="more than the 5120 bytes"):
        files.list_dir("sandbox", ".", max_entries=10)
    assert errors("output_over_limit") == before + 1
    assert channel.closed


# -- what is normal must stay normal ------------------------------------------------------


def test_frames_of_other_clients_are_dropped_without_limit_while_idle(
    sandbox_with: Callable[[Answer], Sandbox],
) -> None:
    # Another instance attached to the same sandbox moves a big file: its frames
    # reach this channel too, which keeps none of them and stays open.
    sandbox = sandbox_with(well_behaved)
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    total = STRAY_BUDGET * 3
    tracemalloc.start()
    try:
        for batch in unknown_ids(MAX_PAYLOAD, total):
            sandbox.agents[0].send(batch)
        result = agent_ops.command(channel, request("echo after"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.stdout.text == "bash -lc echo after"
    assert not channel.closed and len(sandbox.agents) == 1
    assert peak < 12 * MiB, f"{peak / MiB:.1f} MiB held while {total // MiB} MiB went by"


def test_the_last_frames_of_a_killed_request_are_no_flood(
    sandbox_with: Callable[[Answer], Sandbox],
) -> None:
    # Our SPAWN kills an orphaned command (KILL_RUNNING): its final output and EXIT
    # still arrive, for an id nobody here waits for.
    orphan = secrets.randbits(63)

    def with_leftovers(request_id: int) -> Iterator[bytes]:
        yield out_frame(orphan, bytes(64 * 1024)) * 4
        yield exit_frame(orphan, 137, bytes(CAP))
        yield exit_frame(request_id)

    sandbox = sandbox_with(answering_spawn(with_leftovers))
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    assert agent_ops.command(channel, request()).exit_code == 0
    assert not channel.closed


def test_a_slow_reader_holds_the_agent_back_instead_of_its_output(
    sandbox_with: Callable[[Answer], Sandbox],
) -> None:
    # A file streamed out of the sandbox (no cap) into a slow sink: the agent
    # waits (backpressure) and the service never holds much more than INBOX_BYTES.
    total = 48 * MiB
    bound = INBOX_BYTES + 8 * MiB  # and the frames on their way, and the fake's own
    assert bound < total / 2
    chunk = bytes(MAX_PAYLOAD - 1)

    def stream_a_file(request_id: int) -> Iterator[bytes]:
        for _ in range(total // len(chunk)):
            yield out_frame(request_id, chunk)
        yield exit_frame(request_id)

    sandbox = sandbox_with(answering_spawn(stream_a_file))
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    received = 0

    def slow_sink(_: int, data: bytes) -> None:
        nonlocal received
        received += len(data)
        time.sleep(0.01)

    tracemalloc.start()
    try:
        outcome = channel.spawn(["siesta-fs", "read", "big"], on_output=slow_sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.exit_code == 0
    assert received == total // len(chunk) * len(chunk)
    assert peak < bound, f"{peak / MiB:.1f} MiB held"
    assert not channel.closed


def test_the_engine_framing_passes_data_on_as_it_comes() -> None:
    frames = DockerStreamFrames()
    assert frames.feed(struct.pack(">BxxxI", 1, 2**32 - 1)[:5]) == []
    pieces = frames.feed(struct.pack(">BxxxI", 1, 2**32 - 1)[5:] + b"abc")
    assert pieces == [(1, b"abc")]  # not held until 4 GiB have come
    assert frames.feed(b"d" * MiB) == [(1, b"d" * MiB)]


def test_a_request_that_ends_early_frees_the_reader_it_held_back(
    sandbox_with: Callable[[Answer], Sandbox],
) -> None:
    # The caller stops reading while the reader waits for room in its inbox: what
    # is left is dropped, and the channel serves the next request.
    spawns = 0

    def first_floods(request_id: int) -> Iterator[bytes]:
        nonlocal spawns
        spawns += 1
        if spawns > 1:
            yield exit_frame(request_id)
            return
        for _ in range(3 * INBOX_BYTES // MAX_PAYLOAD):
            yield out_frame(request_id, bytes(MAX_PAYLOAD - 1))

    def give_up(*_: object) -> None:
        time.sleep(0.5)  # meanwhile the inbox fills up and the reader waits
        raise _GaveUp

    sandbox = sandbox_with(answering_spawn(first_floods))
    channel = sandbox.channels.get("sandbox")
    assert channel is not None
    with pytest.raises(_GaveUp):
        channel.spawn(["cat", "big"], on_output=give_up)
    assert channel.spawn(["true"], wait_seconds=QUICKLY).exit_code == 0
    assert not channel.closed


class _GaveUp(Exception):
    pass
