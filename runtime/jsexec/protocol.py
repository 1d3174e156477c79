"""Messages between the service and a JS worker: length-prefixed JSON on pipes.

Each frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON.
Dedicated pipes (not stdout/stderr), so nothing a script or the engine prints
can corrupt the stream.

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
import struct
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
