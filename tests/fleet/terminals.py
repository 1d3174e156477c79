"""Reading a terminal's WebSocket in the fleet's tests."""

from __future__ import annotations

import json
import time
from typing import Any

import websocket


def screen_until(terminal: websocket.WebSocket, wanted: str) -> str:
    seen = ""
    deadline = time.monotonic() + 20
    while wanted not in seen:
        assert time.monotonic() < deadline, f"no {wanted!r} in {seen!r}"
        opcode, data = terminal.recv_data()
        if opcode == websocket.ABNF.OPCODE_BINARY:
            seen += data.decode(errors="replace")
    return seen


def next_message(terminal: websocket.WebSocket) -> dict[str, Any]:
    while True:
        opcode, data = terminal.recv_data()
        if opcode == websocket.ABNF.OPCODE_TEXT:
            message: dict[str, Any] = json.loads(data)
            return message
