"""A sandbox agent that says whatever a test wants, on the far end of a socket pair.

It reads the service's frames and answers each with the bytes ``answer`` gives
for it: well-formed frames (built with the helpers below) or anything at all.
Its output goes through Docker's multiplexed framing in pieces of at most 32 KiB,
as the engine sends an attach stream, so the service's whole receiving path runs.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterable

from runtime.providers.agent.protocol import (
    HEADER,
    LIMITS,
    UNKNOWN_SIZE,
    Frame,
    FrameReader,
    FrameType,
    encode,
)
from runtime.providers.docker.channels import DockerAttachTransport

ENGINE_PIECE = 32 * 1024
HANG_UP = b""
"""An answer that ends the stream there (the agent's stdout closes)."""
Answer = Callable[[Frame], Iterable[bytes]]


def pong(request_id: int) -> bytes:
    return encode(FrameType.PONG, request_id, struct.pack("<II", 1, 0))


def exit_payload(code: int = 0, stdout: bytes = b"") -> bytes:
    streams = b"".join(
        struct.pack("<QI", len(head), len(head)) + head + struct.pack("<I", 0)
        for head in (stdout, b"")
    )
    limits = LIMITS.pack(0, 0, UNKNOWN_SIZE, UNKNOWN_SIZE)
    return struct.pack("<iBI", code, 0, 1) + streams + limits


def exit_frame(request_id: int, code: int = 0, stdout: bytes = b"") -> bytes:
    return encode(FrameType.EXIT, request_id, exit_payload(code, stdout))


def out_frame(request_id: int, data: bytes, stream: int = 1) -> bytes:
    return encode(FrameType.OUT, request_id, bytes([stream]) + data)


def raw_frame(length: int, frame_type: int, request_id: int, payload: bytes = b"") -> bytes:
    """A frame with any header at all."""
    return HEADER.pack(length, frame_type, request_id) + payload


def well_behaved(frame: Frame) -> Iterable[bytes]:
    """PONG for PING; for SPAWN its argv joined by spaces as stdout, and exit 0."""
    if frame.type is FrameType.PING:
        yield pong(frame.id)
    elif frame.type is FrameType.SPAWN:
        yield exit_frame(frame.id, 0, b" ".join(_argv(frame.payload)))


def answering_spawn(misbehave: Callable[[int], Iterable[bytes]]) -> Answer:
    """PONG for PING, ``misbehave(request id)`` for SPAWN."""

    def answer(frame: Frame) -> Iterable[bytes]:
        if frame.type is FrameType.PING:
            return [pong(frame.id)]
        if frame.type is FrameType.SPAWN:
            return misbehave(frame.id)
        return []

    return answer


class FakeAgent:
    def __init__(self, answer: Answer = well_behaved) -> None:
        self._answer = answer
        self.service_end, self._agent_end = socket.socketpair()
        self.hung_up = threading.Event()
        """The service closed its end (it read EOF from us)."""
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def transport(self) -> DockerAttachTransport:
        return DockerAttachTransport(self.service_end)

    def send(self, data: bytes) -> None:
        """Bytes on the agent's stdout now, framed by the engine."""
        for start in range(0, len(data), ENGINE_PIECE):
            piece = data[start : start + ENGINE_PIECE]
            self._agent_end.sendall(struct.pack(">BxxxI", 1, len(piece)) + piece)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._agent_end.shutdown(socket.SHUT_RDWR)
        self._agent_end.close()
        self.service_end.close()

    def _serve(self) -> None:
        reader = FrameReader()
        try:
            while data := self._agent_end.recv(256 * 1024):
                for frame in reader.feed(data):
                    for answer in self._answer(frame):
                        if answer == HANG_UP:
                            self._agent_end.shutdown(socket.SHUT_WR)
                            continue
                        self.send(answer)
        except OSError:
            pass
        self.hung_up.set()


def _argv(payload: bytes) -> list[bytes]:
    (argc,) = struct.unpack_from("<I", payload, 16)
    offset, argv = 20, []
    for _ in range(argc):
        (length,) = struct.unpack_from("<I", payload, offset)
        argv.append(payload[offset + 4 : offset + 4 + length])
        offset += 4 + length
    return argv
