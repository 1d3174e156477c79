"""The agent's protocol 3 in Docker: several channels at once and the process table.

Channel 0 is the engine's attach; socket channels are ``docker exec`` relays
(``siesta-agent --channel``), each getting only the replies to its own requests.
Detached processes are listed, read from any offset of their output ring at the
pace of a reader's credit, fed and signalled from any channel; a command whose
channel closed is collected by RESULT from another. Only processes entering from
outside the sandbox (engine execs) may open a socket channel.
"""

from __future__ import annotations

import errno
import signal
import struct
import time
from collections.abc import Iterator

import docker
import pytest

from runtime.providers.agent.protocol import (
    FROM_CURRENT_END,
    FrameType,
    SpawnFlag,
    parse_error,
    parse_exit,
    spawn_payload,
)
from runtime.providers.agent.table_frames import (
    attach_payload,
    parse_attached,
    parse_data,
    parse_pexit,
    parse_table,
    pid_payload,
    table_spawn_payload,
)
from tests.helpers import REPO, TEST_RUN_ID, TEST_RUN_LABEL
from tests.runtime.providers.agent_channel import (
    AGENT,
    Channel,
    close_all,
    open_channel,
    start_container,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

IMAGE = f"siesta-test/agent3:{TEST_RUN_ID}"


@pytest.fixture(scope="module")
def image(docker_client: docker.DockerClient) -> Iterator[str]:
    docker_client.images.build(
        path=str(REPO / "images"),
        dockerfile=str(REPO / "tests" / "fixtures" / "agent3.Dockerfile"),
        tag=IMAGE,
        labels={TEST_RUN_LABEL: TEST_RUN_ID},
        rm=True,
    )
    yield IMAGE
    docker_client.images.remove(IMAGE, force=True)


@pytest.fixture(autouse=True)
def _close_channels() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def sandbox(docker_client: docker.DockerClient, image: str) -> Iterator[tuple[str, Channel]]:
    container, channel = start_container(docker_client, image)
    yield container, channel
    channel.close()
    docker_client.api.remove_container(container, force=True)


def spawn_detached(
    channel: Channel, request_id: int, script: str, ring_bytes: int = 1 << 20
) -> int:
    channel.send(
        FrameType.SPAWN,
        request_id,
        table_spawn_payload(["sh", "-c", script], ring_bytes=ring_bytes),
    )
    started = channel.take(FrameType.STARTED, request_id)
    return int(struct.unpack("<I", started.payload)[0])


def read_all(channel: Channel, attachment: int) -> tuple[bytes, int]:
    """The DATA of an attachment (given enough credit) up to its PEXIT's exit code."""
    data = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for frame in channel.quiet(0.05):
            if frame.id != attachment:
                continue
            if frame.type is FrameType.DATA:
                part = parse_data(frame.payload)
                data += part.data
            elif frame.type is FrameType.PEXIT:
                return data, parse_pexit(frame.payload).exit_code
    raise AssertionError(data[-200:])


def test_each_channel_gets_only_its_replies(docker_client: docker.DockerClient, image: str) -> None:
    container, zero = start_container(docker_client, image)
    try:
        a, b = open_channel(docker_client, container), open_channel(docker_client, container)
        for n, channel in enumerate((zero, a, b)):
            channel.send(FrameType.PING, 100 + n)
            version, _ = struct.unpack("<II", channel.take(FrameType.PONG, 100 + n).payload)
            assert version == 3
        a.send(
            FrameType.SPAWN,
            7,
            spawn_payload(
                ["echo", "on a"], timeout_ms=0, grace_ms=0, cap_bytes=0, flags=SpawnFlag(0)
            ),
        )
        assert a.take(FrameType.OUT, 7).payload == b"\x01on a\n"
        assert parse_exit(a.take(FrameType.EXIT, 7).payload).exit_code == 0
        b.send(
            FrameType.SPAWN,
            8,
            spawn_payload(["nope"], timeout_ms=0, grace_ms=0, cap_bytes=0, flags=SpawnFlag(0)),
        )
        assert parse_error(b.take(FrameType.ERROR, 8).payload)[0] == errno.ENOENT
        assert zero.quiet() == [] and a.quiet() == [] and b.quiet() == []
        # A sandbox process may not open a channel: not the relay started by a
        # command (its parent is the agent), nor one started by a shell the
        # engine exec'd (its parent is inside), however it was started.
        flags = SpawnFlag.STDIN
        zero.send(
            FrameType.SPAWN,
            9,
            spawn_payload(
                [AGENT, "--channel"], timeout_ms=10000, grace_ms=0, cap_bytes=0, flags=flags
            ),
        )
        zero.send(FrameType.STDIN, 9, struct.pack("<IBQ", 9, FrameType.PING, 55))
        result = parse_exit(zero.take(FrameType.EXIT, 9).payload)
        # Refused: no answer came back. The relay ends 0 when the agent hangs up after
        # its hello, 2 when the hang-up came first and the hello could not be sent.
        assert result.stdout.total_bytes == 0
        assert result.exit_code in (0, 2)
        via_shell = open_channel(
            docker_client, container, "sh", "-c", f"{AGENT} --channel; echo $?"
        )
        via_shell.send(FrameType.PING, 56)
        via_shell.quiet(1)
        assert via_shell.ended
        logs = docker_client.api.logs(container, stdout=False, stderr=True).decode()
        assert logs.count("socket channel refused") == 2, logs
        assert "inside the sandbox" in logs
        # ... and the channels that were let in still answer.
        b.send(FrameType.PING, 57)
        b.take(FrameType.PONG, 57)
    finally:
        docker_client.api.remove_container(container, force=True)


def test_a_detached_process_is_served_from_any_channel(
    docker_client: docker.DockerClient, sandbox: tuple[str, Channel]
) -> None:
    container, zero = sandbox
    a, b = open_channel(docker_client, container), open_channel(docker_client, container)
    script = "echo ready; while read line; do echo got:$line; done; sleep 60"
    payload = table_spawn_payload(
        ["sh", "-c", script], ring_bytes=65536, tag="job-1", flags=SpawnFlag.STDIN
    )
    a.send(FrameType.SPAWN, 20, payload)
    pid = struct.unpack("<I", a.take(FrameType.STARTED, 20).payload)[0]
    b.send(FrameType.LIST, 1)
    (entry,) = parse_table(b.take(FrameType.TABLE, 1).payload)
    assert (entry.pid, entry.request_id, entry.tag, entry.exited) == (pid, 20, "job-1", False)
    assert entry.argv == ["sh", "-c", script] and not entry.pty
    b.send(FrameType.ATTACH, 2, attach_payload(pid, 0, 1 << 20))
    assert parse_attached(b.take(FrameType.ATTACHED, 2).payload).first == 0
    assert parse_data(b.take(FrameType.DATA, 2).payload).data == b"ready\n"
    b.send(FrameType.PINPUT, 3, pid_payload(pid) + b"hello\n")
    b.take(FrameType.OK, 3)
    got = parse_data(b.take(FrameType.DATA, 2).payload)
    assert (got.offset, got.stream, got.data) == (6, 1, b"got:hello\n")
    assert a.take(FrameType.OUT, 20).payload == b"\x01ready\n"  # the owner still gets OUT
    b.send(FrameType.PRESIZE, 4, pid_payload(pid, 40, 100, fmt="HH"))
    assert parse_error(b.take(FrameType.ERROR, 4).payload)[0] == errno.ENOTTY
    b.send(FrameType.PSIGNAL, 5, pid_payload(12345, 15, fmt="I"))
    assert parse_error(b.take(FrameType.ERROR, 5).payload)[0] == errno.ESRCH
    b.send(FrameType.FORGET, 6, pid_payload(pid))
    assert parse_error(b.take(FrameType.ERROR, 6).payload)[0] == errno.EBUSY
    b.send(FrameType.PSIGNAL, 7, pid_payload(pid, signal.SIGTERM, fmt="I"))
    b.take(FrameType.OK, 7)
    pexit = parse_pexit(b.take(FrameType.PEXIT, 2).payload)
    assert (pexit.exit_code, pexit.end) == (143, 16)
    assert parse_exit(a.take(FrameType.EXIT, 20).payload).exit_code == 143
    zero.send(FrameType.LIST, 8)
    (entry,) = parse_table(zero.take(FrameType.TABLE, 8).payload)
    assert (entry.exited, entry.exit_code, entry.end) == (True, 143, 16)
    assert entry.ended_ms >= entry.started_ms > 0
    b.send(FrameType.PINPUT, 9, pid_payload(pid) + b"late\n")
    assert parse_error(b.take(FrameType.ERROR, 9).payload)[0] == errno.ESRCH
    b.send(FrameType.FORGET, 10, pid_payload(pid))
    b.take(FrameType.OK, 10)
    b.send(FrameType.LIST, 11)
    assert parse_table(b.take(FrameType.TABLE, 11).payload) == []


def test_attach_from_an_offset_and_past_the_ring(
    docker_client: docker.DockerClient, sandbox: tuple[str, Channel]
) -> None:
    container, zero = sandbox
    expected = b"".join(b"%d\n" % i for i in range(1, 3001))
    pid = spawn_detached(zero, 30, "seq 1 3000", ring_bytes=4096)
    zero.take(FrameType.EXIT, 30)
    b = open_channel(docker_client, container)
    b.send(FrameType.ATTACH, 1, attach_payload(pid, 0, 1 << 20))
    attached = parse_attached(b.take(FrameType.ATTACHED, 1).payload)
    assert attached.end == len(expected) and attached.first > 0  # a gap: evicted
    data, code = read_all(b, 1)
    assert code == 0 and data == expected[attached.first :]
    inside = len(expected) - 100
    b.send(FrameType.ATTACH, 2, attach_payload(pid, inside, 1 << 20))
    assert parse_attached(b.take(FrameType.ATTACHED, 2).payload).first == inside
    assert read_all(b, 2) == (expected[inside:], 0)
    b.send(FrameType.ATTACH, 3, attach_payload(pid, FROM_CURRENT_END, 0))
    assert parse_attached(b.take(FrameType.ATTACHED, 3).payload).first == len(expected)
    assert parse_pexit(b.take(FrameType.PEXIT, 3).payload).end == len(expected)


def test_a_reader_without_credit_blocks_nothing(
    docker_client: docker.DockerClient, sandbox: tuple[str, Channel]
) -> None:
    container, _ = sandbox
    a, slow, fast = (open_channel(docker_client, container) for _ in range(3))
    pid = spawn_detached(a, 40, "echo start; sleep 1; head -c 20000000 /dev/zero; echo end")
    slow.send(FrameType.ATTACH, 1, attach_payload(pid, 0, 0))
    fast.send(FrameType.ATTACH, 2, attach_payload(pid, 0, 1 << 30))
    slow.take(FrameType.ATTACHED, 1)
    fast.take(FrameType.ATTACHED, 2)
    a.close()  # the owner leaves: its OUT frames are dropped, the ring goes on
    data, code = read_all(fast, 2)
    # The process ran at its own pace: a reader slower than it lost what the 1 MiB
    # ring dropped (DATA offsets skip), but reads up to its last byte and PEXIT.
    assert code == 0 and data.startswith(b"start\n") and data.endswith(b"end\n")
    assert slow.quiet(0.2) == []
    slow.send(FrameType.CREDIT, 1, struct.pack("<I", 10))
    resumed = parse_data(slow.take(FrameType.DATA, 1).payload)
    assert resumed.offset > 20000010 - (1 << 20)  # where the ring resumed: a gap
    assert len(resumed.data) <= 10


def test_result_moves_a_running_command_to_another_channel(
    docker_client: docker.DockerClient, sandbox: tuple[str, Channel]
) -> None:
    container, _ = sandbox
    a, b = open_channel(docker_client, container), open_channel(docker_client, container)
    a.send(
        FrameType.SPAWN,
        50,
        spawn_payload(
            ["sh", "-c", "sleep 1.5; echo late"],
            timeout_ms=0,
            grace_ms=0,
            cap_bytes=0,
            flags=SpawnFlag(0),
        ),
    )
    # The agent reads a channel's frames in order: a PONG says it has the SPAWN (a
    # sleep said so only on a quiet machine; a relay closed first never passed it on).
    a.send(FrameType.PING, 51)
    a.take(FrameType.PONG, 51)
    a.close()
    b.send(FrameType.RESULT, 50)
    assert b.take(FrameType.OUT, 50).payload == b"\x01late\n"
    assert parse_exit(b.take(FrameType.EXIT, 50).payload).exit_code == 0
    c = open_channel(docker_client, container)
    c.send(FrameType.RESULT, 50)
    assert parse_exit(c.take(FrameType.EXIT, 50).payload).stdout.total_bytes == 5


def test_at_most_16_socket_channels(
    docker_client: docker.DockerClient, sandbox: tuple[str, Channel]
) -> None:
    container, _ = sandbox
    channels = [open_channel(docker_client, container) for _ in range(16)]
    for n, channel in enumerate(channels):
        channel.send(FrameType.PING, n + 1)
        channel.take(FrameType.PONG, n + 1)
    extra = open_channel(docker_client, container)
    extra.send(FrameType.PING, 99)
    assert extra.quiet(1) == [] and extra.ended
    channels.pop().close()
    time.sleep(0.5)
    again = open_channel(docker_client, container)
    again.send(FrameType.PING, 100)
    again.take(FrameType.PONG, 100)


def test_round_trips_and_throughput(
    docker_client: docker.DockerClient, sandbox: tuple[str, Channel]
) -> None:
    container, zero = sandbox
    b = open_channel(docker_client, container)
    size = 32_000_000
    pid = spawn_detached(zero, 60, f"head -c {size} /dev/zero", ring_bytes=size + 4096)
    zero.take(FrameType.EXIT, 60)
    started = time.monotonic()
    for n in range(100):
        b.send(FrameType.LIST, 1000 + n)
        b.take(FrameType.TABLE, 1000 + n)
    list_ms = (time.monotonic() - started) * 10
    started = time.monotonic()
    for n in range(100):
        b.send(FrameType.ATTACH, 2000 + n, attach_payload(pid, FROM_CURRENT_END, 0))
        b.take(FrameType.ATTACHED, 2000 + n)
        b.take(FrameType.PEXIT, 2000 + n)
    attach_ms = (time.monotonic() - started) * 10
    started = time.monotonic()
    b.send(FrameType.ATTACH, 3, attach_payload(pid, 0, 2**32 - 1))
    data, _ = read_all(b, 3)
    seconds = time.monotonic() - started
    assert len(data) == size
    print(f"LIST {list_ms:.2f} ms, ATTACH {attach_ms:.2f} ms, DATA {size / seconds / 1e6:.0f} MB/s")


def test_under_gvisor_a_relay_is_let_in_by_its_credentials_and_one_from_inside_is_not(
    docker_client: docker.DockerClient, image: str
) -> None:
    """gVisor's SO_PEERCRED names the listener (the agent), not the peer; the relay's
    first byte carries its credentials, which the kernel checked: a relay the engine
    exec'd is let in, the same relay started by a sandbox process is refused."""
    container, zero = start_container(docker_client, image, "runsc")
    try:
        relay = open_channel(docker_client, container)
        relay.send(FrameType.PING, 1)
        relay.take(FrameType.PONG, 1)
        flags = SpawnFlag.STDIN
        zero.send(
            FrameType.SPAWN,
            9,
            spawn_payload(
                [AGENT, "--channel"], timeout_ms=10000, grace_ms=0, cap_bytes=0, flags=flags
            ),
        )
        # Its stdin stays open: it ends only when the agent closes its socket (a relay
        # that had exited first could not be checked at all: refused all the same).
        zero.send(FrameType.STDIN, 9, struct.pack("<IBQ", 9, FrameType.PING, 55))
        result = parse_exit(zero.take(FrameType.EXIT, 9).payload)
        # Refused: no answer came back. The relay ends 0 when the agent hangs up after
        # its hello, 2 when the hang-up came first and the hello could not be sent.
        assert result.stdout.total_bytes == 0
        assert result.exit_code in (0, 2)  # no PONG for it
        logs = docker_client.api.logs(container, stdout=False, stderr=True).decode()
        assert logs.count("open: pid") == 1 and "(by its credentials)" in logs, logs
        assert logs.count("by the credentials of its first byte") == 1, logs
        assert "inside the sandbox" in logs, logs  # refused for its parent
        relay.send(FrameType.PING, 2)  # the relay let in is untouched
        relay.take(FrameType.PONG, 2)
    finally:
        docker_client.api.remove_container(container, force=True)
