"""Capturing command output with a hard memory bound.

A command may print gigabytes; the service keeps only the first and the last
``limit / 2`` bytes of each stream while it is produced and counts the rest,
so memory stays flat however much the command prints.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CapturedStream:
    text: str
    total_bytes: int
    truncated: bool


class HeadTailBuffer:
    """Keeps the head and the tail of a byte stream, drops (and counts) the middle."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

    def write(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if len(chunk) >= self._tail_limit:
            self._tail = bytearray(chunk[-self._tail_limit :])
        else:
            self._tail += chunk
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]

    def last_bytes(self) -> bytes:
        """The stream's last ``limit - limit // 2`` bytes (or all of it), in one piece:
        bytes are only dropped once the tail is full."""
        return bytes((self._head + self._tail)[-self._tail_limit :])

    @property
    def dropped_bytes(self) -> int:
        return self.total_bytes - len(self._head) - len(self._tail)

    def result(self) -> CapturedStream:
        dropped = self.dropped_bytes
        if dropped == 0:
            data = bytes(self._head + self._tail)
            return CapturedStream(_decode(data), self.total_bytes, truncated=False)
        marker = f"\n[... {dropped} bytes of output dropped ...]\n"
        text = _decode(bytes(self._head)) + marker + _decode(bytes(self._tail))
        return CapturedStream(text, self.total_bytes, truncated=True)


def captured(head: bytes, tail: bytes, total_bytes: int) -> CapturedStream:
    """What ``HeadTailBuffer.result`` gives, from a head and a tail kept elsewhere
    (the sandbox agent keeps them inside the sandbox)."""
    dropped = total_bytes - len(head) - len(tail)
    if dropped <= 0:
        return CapturedStream(_decode(head + tail), total_bytes, truncated=False)
    marker = f"\n[... {dropped} bytes of output dropped ...]\n"
    return CapturedStream(_decode(head) + marker + _decode(tail), total_bytes, truncated=True)


def _decode(data: bytes) -> str:
    # Output is text for the model; bytes that are not UTF-8 (or a character
    # split at the cut) become U+FFFD rather than failing the call.
    return data.decode("utf-8", errors="replace")
