"""The process table's frames (protocol 3, images/siesta-agent/PROTOCOL.md): a
detached SPAWN with a ring and a tag, ATTACH and the P* frames' payloads, and the
parsers of what the agent answers (ATTACHED, DATA, PEXIT, TABLE)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from runtime.providers.agent.protocol import ProtocolError, SpawnFlag, spawn_payload, string_at

T = TypeVar("T")


def table_spawn_payload(
    argv: list[str],
    *,
    ring_bytes: int,
    tag: str = "",
    timeout_ms: int = 0,
    grace_ms: int = 0,
    cap_bytes: int = 0,
    flags: SpawnFlag = SpawnFlag.DETACHED,
) -> bytes:
    """A DETACHED SPAWN with its ring's size and a tag (protocol 3)."""
    base = spawn_payload(
        argv,
        timeout_ms=timeout_ms,
        grace_ms=grace_ms,
        cap_bytes=cap_bytes,
        flags=flags | SpawnFlag.DETACHED | SpawnFlag.RING,
    )
    data = tag.encode()
    return base + struct.pack("<II", ring_bytes, len(data)) + data


def attach_payload(pid: int, start: int, credit: int) -> bytes:
    """ATTACH: read ``pid``'s output from offset ``start`` (``FROM_CURRENT_END``: new output)."""
    return struct.pack("<IQI", pid, start, credit)


def pid_payload(pid: int, *more: int, fmt: str = "") -> bytes:
    """PINPUT/PEOF/PSIGNAL/PRESIZE/FORGET: the pid, then ``more`` packed as ``fmt``."""
    return struct.pack("<I" + fmt, pid, *more)


@dataclass(frozen=True)
class Attached:
    first: int
    """The offset the attachment starts from (above the one asked for: a gap)."""
    end: int
    asked: int
    """The offset asked for, resolved (the end's, the TAKE cursor's): ``first - asked``
    bytes were lost to the ring."""


@dataclass(frozen=True)
class Data:
    offset: int
    stream: int
    data: bytes


@dataclass(frozen=True)
class ProcessExit:
    exit_code: int
    end: int
    duration_ms: int


@dataclass(frozen=True)
class TableEntry:
    pid: int
    request_id: int
    exited: bool
    exit_code: int
    pty: bool
    started_ms: int
    ended_ms: int
    first: int
    end: int
    tag: str
    argv: list[str]


_ENTRY = struct.Struct("<IQBiBQQQQ")


def _parse(what: str, parse: Callable[[], T]) -> T:
    try:
        return parse()
    except struct.error as exc:
        msg = f"malformed {what} frame ({exc})"
        raise ProtocolError(msg, "payload") from exc


def parse_attached(payload: bytes) -> Attached:
    def parse() -> Attached:
        first, end = struct.unpack_from("<QQ", payload)
        asked = struct.unpack_from("<Q", payload, 16)[0] if len(payload) >= 24 else first
        return Attached(first, end, asked)

    return _parse("ATTACHED", parse)


def parse_data(payload: bytes) -> Data:
    def parse() -> Data:
        offset, stream = struct.unpack_from("<QB", payload)
        return Data(offset, stream, payload[9:])

    return _parse("DATA", parse)


def parse_pexit(payload: bytes) -> ProcessExit:
    return _parse("PEXIT", lambda: ProcessExit(*struct.unpack("<iQI", payload)))


def parse_table(payload: bytes) -> list[TableEntry]:
    def parse() -> list[TableEntry]:
        (count,) = struct.unpack_from("<I", payload)
        offset, entries = 4, []
        for _ in range(count):
            pid, rid, state, code, pty, started, ended, first, end = _ENTRY.unpack_from(
                payload, offset
            )
            tag, offset = string_at(payload, offset + _ENTRY.size)
            argv, offset = string_at(payload, offset)
            entries.append(
                TableEntry(
                    pid,
                    rid,
                    state == 1,
                    code,
                    bool(pty),
                    started,
                    ended,
                    first,
                    end,
                    tag.decode(errors="replace"),
                    argv.decode(errors="surrogateescape").split("\0"),
                )
            )
        return entries

    return _parse("TABLE", parse)
