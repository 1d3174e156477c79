"""EXIT frames from agents of this version and of earlier ones."""

from __future__ import annotations

import struct

import pytest

from runtime.providers.agent_protocol import LIMITS, UNKNOWN_SIZE, ProtocolError, parse_exit


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
