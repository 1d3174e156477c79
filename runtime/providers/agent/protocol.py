"""Frames of the sandbox agent's protocol (images/siesta-agent/PROTOCOL.md).

Pure encoding and decoding, no I/O: the channel (``channel.py``) moves
the bytes, the provider decides what to ask.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

HEADER = struct.Struct("<IBQ")
"""u32 length (of type + id + payload), u8 type, u64 request id."""
MAX_PAYLOAD = 1024 * 1024
MAX_FRAME = HEADER.size + MAX_PAYLOAD
"""The most bytes a frame reader ever holds."""
PROTOCOL_VERSION = 2
PROCESS_TABLE_VERSION = 3
"""Agents of this protocol have socket channels and the process table."""


class FrameType(enum.IntEnum):
    SPAWN = 1
    STDIN = 2
    STDIN_EOF = 3
    CANCEL = 4
    PING = 5
    RESULT = 6
    SIGNAL = 7
    RESIZE = 8
    OUT = 10
    EXIT = 11
    PONG = 12
    ERROR = 13
    STARTED = 14
    LIST = 20
    ATTACH = 21
    CREDIT = 22
    DETACH = 23
    PINPUT = 24
    PEOF = 25
    PSIGNAL = 26
    PRESIZE = 27
    FORGET = 28
    TAKE = 29
    ATTACHED = 41
    DATA = 42
    PEXIT = 43
    TABLE = 44
    OK = 45


class SpawnFlag(enum.IntFlag):
    STDIN = 1
    STREAM = 2
    KILL_RUNNING = 4
    DETACHED = 8
    """Protocol 2: a process of its own (outlives its call; ``STARTED`` tells its pid)."""
    PTY = 16
    """Protocol 2: stdin, stdout and stderr are a new terminal (output as stream 1)."""
    RING = 32
    """Protocol 3: ``u32 ring_bytes`` and a tag follow the arguments (``table_spawn_payload``)."""


AGENT_FRAMES = frozenset(
    {FrameType.OUT, FrameType.EXIT, FrameType.PONG, FrameType.ERROR, FrameType.STARTED}
)
"""What an agent may send."""
AGENT_FRAMES_V3 = AGENT_FRAMES | {
    FrameType.ATTACHED,
    FrameType.DATA,
    FrameType.PEXIT,
    FrameType.TABLE,
    FrameType.OK,
}
"""What an agent of protocol 3 may send on a channel that asks for the process table."""
FROM_CURRENT_END = 2**64 - 1
"""ATTACH's ``from`` for: only output still to come."""
FROM_TAKEN = 2**64 - 2
"""ATTACH's ``from`` for: where the process's TAKE cursor is."""


class ProtocolError(Exception):
    """The agent sent something that is not a frame of this protocol.

    ``reason`` names the rule it broke (the label of
    ``siesta_agent_protocol_errors_total``): ``frame_length``, ``frame_type``,
    ``payload``, ``truncated``, ``stray_flood``, ``unexpected``, ``output_over_limit``.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Frame:
    type: FrameType
    id: int
    payload: bytes


@dataclass(frozen=True)
class StreamPart:
    total_bytes: int
    head: bytes
    tail: bytes


@dataclass(frozen=True)
class Exit:
    exit_code: int
    timed_out: bool
    duration_ms: int
    stdout: StreamPart
    stderr: StreamPart
    oom_kills: int = 0
    pids_refusals: int = 0
    workspace_free_bytes: int | None = None
    root_free_bytes: int | None = None
    """``None``: unknown (the agent could not tell, or an agent older than these fields)."""


LIMITS = struct.Struct("<IIQQ")
"""EXIT's tail: OOM kills and pids-limit refusals during the request, then the free
bytes of the workspace and of the root file system at its end."""
UNKNOWN_SIZE = 2**64 - 1


def encode(frame_type: FrameType, request_id: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(1 + 8 + len(payload), frame_type, request_id) + payload


def spawn_payload(
    argv: list[str], *, timeout_ms: int, grace_ms: int, cap_bytes: int, flags: SpawnFlag
) -> bytes:
    parts = [struct.pack("<IIIII", timeout_ms, grace_ms, cap_bytes, int(flags), len(argv))]
    for arg in argv:
        data = arg.encode("utf-8", errors="surrogateescape")
        parts.append(struct.pack("<I", len(data)) + data)
    return b"".join(parts)


def parse_exit(payload: bytes) -> Exit:
    try:
        exit_code, timed_out, duration_ms = struct.unpack_from("<iBI", payload, 0)
        offset = 9
        streams = []
        for _ in range(2):
            (total,) = struct.unpack_from("<Q", payload, offset)
            offset += 8
            head, offset = string_at(payload, offset)
            tail, offset = string_at(payload, offset)
            streams.append(StreamPart(total, head, tail))
        pressure: tuple[int, ...] = (0, 0, UNKNOWN_SIZE, UNKNOWN_SIZE)
        if len(payload) - offset >= LIMITS.size:  # agents before these fields send none
            pressure = LIMITS.unpack_from(payload, offset)
    except struct.error as exc:
        msg = f"malformed EXIT frame ({exc})"
        raise ProtocolError(msg, "payload") from exc
    oom, pids, work_free, root_free = pressure
    return Exit(
        exit_code,
        bool(timed_out),
        duration_ms,
        streams[0],
        streams[1],
        oom,
        pids,
        None if work_free == UNKNOWN_SIZE else work_free,
        None if root_free == UNKNOWN_SIZE else root_free,
    )


def parse_error(payload: bytes) -> tuple[int, str]:
    try:
        (errno,) = struct.unpack_from("<I", payload, 0)
        message, _ = string_at(payload, 4)
    except struct.error as exc:
        msg = f"malformed ERROR frame ({exc})"
        raise ProtocolError(msg, "payload") from exc
    return errno, message.decode("utf-8", errors="replace")


def string_at(payload: bytes, offset: int) -> tuple[bytes, int]:
    (length,) = struct.unpack_from("<I", payload, offset)
    start = offset + 4
    if start + length > len(payload):
        msg = "a string runs past the end of its frame"
        raise struct.error(msg)
    return payload[start : start + length], start + length


def check_from_agent(frame: Frame) -> None:
    """Raises ``ProtocolError`` unless ``frame``'s payload is what its type carries."""
    payload = frame.payload
    if frame.type is FrameType.OUT:
        if len(payload) < 2 or payload[0] not in (1, 2):
            msg = f"an OUT frame of {len(payload)} bytes names no stream or carries nothing"
            raise ProtocolError(msg, "payload")
    elif frame.type is FrameType.EXIT:
        parse_exit(payload)
    elif frame.type is FrameType.ERROR:
        parse_error(payload)
    elif frame.type is FrameType.PONG and len(payload) < 8:
        msg = f"a PONG frame of {len(payload)} bytes (8 expected)"
        raise ProtocolError(msg, "payload")
    elif frame.type is FrameType.STARTED and len(payload) != 4:
        msg = f"a STARTED frame of {len(payload)} bytes (4 expected)"
        raise ProtocolError(msg, "payload")


_TYPES = {kind.value: kind for kind in FrameType}


class FrameReader:
    """Turns a byte stream into frames, whatever sizes the bytes arrive in.

    It holds at most one frame (``MAX_FRAME`` bytes) and checks a frame's length
    as soon as its first 4 bytes are in and its type with the rest of the header,
    so a bad frame is refused before any of its payload is kept (or waited for).
    Frames of other ``types`` than given are refused.
    """

    def __init__(self, types: Collection[FrameType] = tuple(FrameType)) -> None:
        self._types = frozenset(types)
        self._buffer = bytearray()
        self._wanted = 4  # the length field, then the whole header, then the frame
        self._header_checked = False

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held now."""
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[Frame]:
        """The frames completed by ``data``, one by one."""
        view = memoryview(data)
        while view:
            if not self._buffer and len(view) >= HEADER.size:  # the common case: no copy
                length, frame_type, request_id = HEADER.unpack_from(view)
                self._check(length, frame_type, request_id)
                end = 4 + length
                if len(view) >= end:
                    yield Frame(_TYPES[frame_type], request_id, bytes(view[HEADER.size : end]))
                    view = view[end:]
                    continue
            take = self._wanted - len(self._buffer)
            self._buffer += view[:take]
            view = view[take:]
            if len(self._buffer) < self._wanted:
                return
            if self._wanted == 4:
                (length,) = struct.unpack_from("<I", self._buffer)
                self._check(length)
                self._wanted = HEADER.size
                continue
            length, frame_type, request_id = HEADER.unpack_from(self._buffer)
            if not self._header_checked:
                self._check(length, frame_type, request_id)
                self._header_checked = True
                self._wanted = 4 + length
                if len(self._buffer) < self._wanted:
                    continue
            payload = bytes(self._buffer[HEADER.size :])
            self._buffer.clear()
            self._wanted = 4
            self._header_checked = False
            yield Frame(_TYPES[frame_type], request_id, payload)

    def _check(self, length: int, frame_type: int | None = None, request_id: int = 0) -> None:
        if length < 9 or length > MAX_PAYLOAD + 9:
            msg = f"frame length {length} is out of range (9 to {MAX_PAYLOAD + 9})"
            raise ProtocolError(msg, "frame_length")
        if frame_type is not None and frame_type not in self._types:
            msg = f"frame type {frame_type} (for request {request_id:x}) is not expected here"
            raise ProtocolError(msg, "frame_type")
