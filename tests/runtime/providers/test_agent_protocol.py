"""EXIT frames from agents of this version and of earlier ones; the frame reader."""

from __future__ import annotations

import struct

import pytest

from runtime.providers.agent.protocol import (
    AGENT_FRAMES,
    HEADER,
    LIMITS,
    MAX_FRAME,
    MAX_PAYLOAD,
    UNKNOWN_SIZE,
    Frame,
    FrameReader,
    FrameType,
    ProtocolError,
    encode,
    parse_exit,
)


def exit_payload(tail: bytes = b"") -> bytes:
    streams = b"".join(
        struct.pack("<Q", total) + struct.pack("<I", len(head)) + head + struct.pack("<I", 0)
        for total, head in ((3, b"out"), (0, b""))
    )
    return struct.pack("<iBI", 137, 0, 42) + streams + tail


def test_an_exit_carries_what_the_limits_did() -> None:
    frame = parse_exit(exit_payload(LIMITS.pack(1, 2, 4096, UNKNOWN_SIZE)))
    assert (frame.exit_code, frame.stdout.head, frame.duration_ms) == (137, b"out", 42)
    assert (frame.oom_kills, frame.pids_refusals) == (1, 2)
    assert (frame.workspace_free_bytes, frame.root_free_bytes) == (4096, None)


def test_an_older_agent_says_nothing_of_limits() -> None:
    frame = parse_exit(exit_payload())
    assert (frame.oom_kills, frame.pids_refusals) == (0, 0)
    assert (frame.workspace_free_bytes, frame.root_free_bytes) == (None, None)


def test_a_cut_frame_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        parse_exit(exit_payload()[:20])


def test_a_reader_holds_at_most_one_frame() -> None:
    reader = FrameReader(AGENT_FRAMES)
    frame = encode(FrameType.OUT, 7, b"\x01" + bytes(MAX_PAYLOAD - 1))
    stream = frame * 3
    frames: list[Frame] = []
    held = 0
    for start in range(0, len(stream), 100_000):
        frames += reader.feed(stream[start : start + 100_000])
        held = max(held, reader.buffered)
    assert [(f.type, f.id, len(f.payload)) for f in frames] == [(FrameType.OUT, 7, MAX_PAYLOAD)] * 3
    assert held <= MAX_FRAME and reader.buffered == 0


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (HEADER.pack(MAX_PAYLOAD + 10, FrameType.OUT, 1), "frame_length"),
        (HEADER.pack(8, FrameType.OUT, 1), "frame_length"),
        (HEADER.pack(9, 99, 1), "frame_type"),
        (HEADER.pack(9, FrameType.SPAWN, 1), "frame_type"),  # the service's, not the agent's
    ],
)
def test_a_header_is_refused_before_its_payload_is_kept(header: bytes, reason: str) -> None:
    reader = FrameReader(AGENT_FRAMES)
    with pytest.raises(ProtocolError) as refused:
        list(reader.feed(header))
    assert refused.value.reason == reason


def test_a_bad_length_is_refused_before_the_rest_of_its_header_comes() -> None:
    # A sandbox process that writes a few bytes into the channel (possible under
    # gVisor) must not leave the stream waiting for a header that never comes.
    with pytest.raises(ProtocolError) as refused:
        list(FrameReader(AGENT_FRAMES).feed(b"garbage"))
    assert refused.value.reason == "frame_length"


@pytest.mark.parametrize("piece", [1, 3, 4, 5, 12, 13, 14, 40, 4096, 10**6])
def test_frames_come_out_whole_however_the_stream_is_cut(piece: int) -> None:
    sent = [
        Frame(FrameType.PONG, 1, bytes(8)),
        Frame(FrameType.OUT, 2, b"\x01x"),
        Frame(FrameType.EXIT, 3, exit_payload()),
        Frame(FrameType.ERROR, 2**64 - 1, b""),
        Frame(FrameType.OUT, 4, b"\x02" + bytes(70_000)),
    ]
    stream = b"".join(encode(frame.type, frame.id, frame.payload) for frame in sent)
    reader = FrameReader(AGENT_FRAMES)
    received = [
        f
        for start in range(0, len(stream), piece)
        for f in reader.feed(stream[start : start + piece])
    ]
    assert received == sent and reader.buffered == 0
