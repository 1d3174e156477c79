"""Reading terminals in tests: a ``/v1`` terminal's WebSocket, and an E2B ``pty``."""

from __future__ import annotations

import json
import time
from typing import Any

import websocket


def screen_until(terminal: websocket.WebSocket, wanted: str) -> str:
    """What the terminal printed, up to and including ``wanted``."""
    seen = ""
    deadline = time.monotonic() + 20
    while wanted not in seen:
        assert time.monotonic() < deadline, f"no {wanted!r} in {seen!r}"
        opcode, data = terminal.recv_data()
        assert opcode == websocket.ABNF.OPCODE_BINARY, data
        seen += data.decode(errors="replace")
    return seen


def next_message(terminal: websocket.WebSocket) -> dict[str, Any]:
    """The next JSON message, past what the terminal prints meanwhile."""
    while True:
        opcode, data = terminal.recv_data()
        if opcode == websocket.ABNF.OPCODE_TEXT:
            message: dict[str, Any] = json.loads(data)
            return message


def pty_until(terminal: Any, output: bytearray, text: bytes) -> None:
    """An E2B ``pty`` handle's output into ``output`` until ``text`` shows (15 s at
    most: the handle's own stream deadline keeps a silent terminal from hanging)."""
    deadline = time.monotonic() + 15
    for event in terminal:  # (stdout, stderr, pty) chunks as they come
        output.extend(event[2] or b"")
        if text in output or time.monotonic() > deadline:
            break
    assert text in output, output.decode(errors="replace")
