"""Messages between the service and a JS worker: length-prefixed JSON on pipes.

Each frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON.
Dedicated pipes (not stdout/stderr), so nothing a script or the engine prints
can corrupt the stream.

The worker's side (``send``, ``receive``) blocks: it has nothing else to do, and
its jail allows no ``select``. The service's side (``receive_by``, ``send_by``)
trusts nothing from a worker: every read and write ends by a deadline, a frame
is bounded in bytes and must be a JSON object (see ``pool.py`` for which kinds
and fields are accepted).

    worker → service   {"type": "ready"}
    service → worker   {"type": "run", "code": str, "limits": {...}}
    worker → service   {"type": "log", "message": str}
                       {"type": "status", "message": str}
                       {"type": "call", "helper": str, "args": list}
    service → worker   {"type": "reply", "ok": bool, "value": any, "error": str}
    worker → service   {"type": "done", "result": str | None, "error": {...} | None,
                        "truncated": bool, "droppedLogs": int}
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024


class ProtocolError(Exception):
    pass


def send(fd: int, message: dict[str, Any]) -> None:
    payload = json.dumps(message, ensure_ascii=False).encode("utf-8")
    data = HEADER.pack(len(payload)) + payload
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def receive(fd: int) -> dict[str, Any] | None:
    """The next message, or ``None`` when the other side closed the pipe."""
    header = _read_exactly(fd, HEADER.size)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        msg = f"frame of {length} bytes is over {MAX_FRAME_BYTES}"
        raise ProtocolError(msg)
    payload = _read_exactly(fd, length)
    if payload is None:
        return None
    message: dict[str, Any] = json.loads(payload)
    return message


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class WorkerTooSlow(ProtocolError):
    """The worker did not finish a frame (or take one) by the deadline."""


def receive_by(fd: int, deadline: float, max_bytes: int) -> dict[str, Any] | None:
    """The next message from an untrusted worker, or ``None`` when it closed the pipe.

    Raises ``ProtocolError`` for a frame over ``max_bytes`` or one that is not a JSON
    object, ``WorkerTooSlow`` when the frame is not complete by ``deadline``."""
    header = _read_by(fd, HEADER.size, deadline)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    if length > max_bytes:
        msg = f"a message of {length} bytes, over the limit of {max_bytes} bytes"
        raise ProtocolError(msg)
    payload = _read_by(fd, length, deadline)
    if payload is None:
        return None
    try:
        message = json.loads(payload)
    except ValueError as error:
        msg = f"a message that is not JSON ({error})"
        raise ProtocolError(msg) from None
    if not isinstance(message, dict):
        msg = f"a message that is not an object ({type(message).__name__})"
        raise ProtocolError(msg)
    return message


def send_by(fd: int, message: dict[str, Any], deadline: float) -> None:
    """Send to a worker that may not be reading (``fd`` non-blocking): give up at
    ``deadline``."""
    payload = json.dumps(message, ensure_ascii=False).encode("utf-8")
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        _wait(fd, deadline, write=True)
        try:
            view = view[os.write(fd, view[: 1 << 16]) :]
        except BlockingIOError:  # the service's ends are non-blocking: try again
            continue


def _read_by(fd: int, size: int, deadline: float) -> bytes | None:
    chunks = []
    while size:
        _wait(fd, deadline, write=False)
        try:
            chunk = os.read(fd, min(size, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _wait(fd: int, deadline: float, *, write: bool) -> None:
    remaining = deadline - time.monotonic()
    if remaining > 0:
        watched = [fd]
        ready = (
            select.select([], watched, [], remaining)[1]
            if write
            else select.select(watched, [], [], remaining)[0]
        )
        if ready:
            return
    msg = "the worker did not finish a message in time"
    raise WorkerTooSlow(msg)
