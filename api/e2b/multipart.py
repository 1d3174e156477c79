"""A ``multipart/form-data`` body read as it arrives: each part's start, its bytes, its
end, never spooled anywhere. python-multipart's streaming parser (the one Starlette's
form parser drives, without the temporary files that parser writes every file part
to). What the body can make the service hold is bounded: a chunk of the request at a
time, a part's headers up to ``MAX_HEADER_BYTES``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from api.e2b.errors import refuse

MAX_HEADER_BYTES = 16 * 1024
"""A part's headers together (its name and file name are in them)."""


@dataclass(frozen=True)
class PartStart:
    name: str
    filename: str | None
    """``None`` for a form field (no ``filename`` in its ``Content-Disposition``)."""


@dataclass(frozen=True)
class PartData:
    data: bytes


@dataclass(frozen=True)
class PartEnd:
    pass


Event = PartStart | PartData | PartEnd


class _Collector:
    """python-multipart's callbacks, turned into events for the caller to take."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.ended = False
        self._headers: list[tuple[bytes, bytes]] = []
        self._field = b""
        self._value = b""
        self._header_bytes = 0

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": lambda: self.events.append(PartEnd()),
            "on_end": self._end,
        }

    def _begin(self) -> None:
        self._headers, self._header_bytes = [], 0

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > MAX_HEADER_BYTES:
            msg = f"a multipart part's headers are over {MAX_HEADER_BYTES} bytes"
            raise refuse(400, msg)

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._count(end - start)
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._count(end - start)
        self._value += data[start:end]

    def _header_end(self) -> None:
        self._headers.append((self._field.lower(), self._value))
        self._field = self._value = b""

    def _headers_finished(self) -> None:
        disposition = dict(self._headers).get(b"content-disposition", b"")
        _, options = parse_options_header(disposition)
        if b"name" not in options:
            raise refuse(400, "a multipart part's Content-Disposition has no name")
        filename = options.get(b"filename")
        self.events.append(
            PartStart(
                options[b"name"].decode(errors="replace"),
                filename.decode(errors="replace") if filename is not None else None,
            )
        )

    def _data(self, data: bytes, start: int, end: int) -> None:
        if end > start:
            self.events.append(PartData(data[start:end]))

    def _end(self) -> None:
        self.ended = True


async def parts(content_type: str, body: AsyncIterator[bytes]) -> AsyncIterator[Event]:
    """The events of the multipart ``body`` as its chunks come; a malformed or cut body
    is a 400 when it shows."""
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise refuse(400, "a multipart/form-data body needs a boundary in its Content-Type")
    collector = _Collector()
    parser = MultipartParser(boundary, collector.callbacks())  # type: ignore[arg-type]
    async for chunk in body:
        try:
            parser.write(chunk)
        except MultipartParseError as exc:
            msg = f"the multipart body is malformed: {exc}"
            raise refuse(400, msg) from exc
        events, collector.events = collector.events, []
        for event in events:
            yield event
    parser.finalize()
    for event in collector.events:
        yield event
    if not collector.ended:
        raise refuse(400, "the multipart body ended before its closing boundary")
