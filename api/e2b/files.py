"""envd's plain HTTP routes: ``GET /health``, ``GET /files`` and ``POST /files``.

Files move through ``runtime.sandbox.user_files`` (``cat`` as the user, in the sandbox) in
chunks: a download is streamed to the client as the sandbox reads it (a few
chunks ahead of a slow client at most), an upload into the sandbox as it arrives,
octet-stream and multipart alike (``api/e2b/multipart.py``: nothing is spooled on the
service's disk), with the metadata of its ``X-Metadata-*`` headers. Errors are envd's
``{"code", "message"}`` with the statuses its SDKs map (404 missing, 400 a folder,
401 no such user, 507 a full disk).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import zlib
from collections.abc import AsyncIterator, Callable

from anyio import from_thread, to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from api.e2b.envd import CALL, EnvdCall, checked_user
from api.e2b.errors import e2b_error, refuse
from api.e2b.multipart import Event, PartData, PartEnd, PartStart, parts
from api.limits import BodyTooLarge
from runtime.core.errors import Cancelled
from runtime.sandbox import metadata
from runtime.sandbox.user_files import AsUser, Written
from runtime.services import Services

CHUNK = 256 * 1024
MAX_FILES = 1000
MAX_FIELDS = 1000
MAX_FIELD_BYTES = 1024 * 1024
"""A multipart upload's other fields: read and dropped, each at most this."""
METADATA_HEADER = "x-metadata-"
"""envd's upload headers of a file's metadata (``X-Metadata-<key>: <value>``)."""
PENDING_CHUNKS = 16
"""Chunks a download may have read ahead of a slow client (then the sandbox waits)."""


class _Handoff:
    """Chunks from a worker thread to an async reader, bounded; the reader going away
    stops the worker at its next chunk."""

    def __init__(self) -> None:
        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue(PENDING_CHUNKS)
        self._gone = threading.Event()

    def put(self, item: bytes | BaseException | None) -> None:
        while True:
            if self._gone.is_set():
                msg = "the client went away during the download"
                raise Cancelled(msg)
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    async def get(self) -> bytes | BaseException | None:
        return await to_thread.run_sync(self._queue.get)

    def close(self) -> None:
        self._gone.set()
        while not self._queue.empty():
            self._queue.get_nowait()


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def _who(request: Request) -> AsUser:
    """The call's sandbox, as the query's ``username`` (else the call's user)."""
    call = CALL.get()
    user = checked_user(request.query_params.get("username", "")) or call.user
    return AsUser(call.who.ctx, user)


async def health(request: Request) -> Response:
    return Response(status_code=204)


async def download(request: Request) -> Response:
    path = request.query_params.get("path")
    if not path:
        return e2b_error(refuse(400, "the path query parameter is required"))
    try:
        who = _who(request)
    except Exception as exc:
        return e2b_error(exc)
    services = _services(request)
    handoff = _Handoff()
    call = CALL.get()

    def read() -> None:
        try:
            call.at_door(
                services,
                "downloadFile",
                {"path": path},
                lambda: services.user_files.read(who, path, handoff.put),
            )
        except Cancelled:
            return
        except Exception as exc:
            handoff.put(exc)
            return
        handoff.put(None)

    worker = asyncio.ensure_future(to_thread.run_sync(read))
    first = await handoff.get()
    if isinstance(first, BaseException):
        await worker
        return e2b_error(first if isinstance(first, Exception) else RuntimeError(first))

    async def body() -> AsyncIterator[bytes]:
        item: bytes | BaseException | None = first
        try:
            while isinstance(item, bytes):
                yield item
                item = await handoff.get()
            if isinstance(item, BaseException):
                raise item  # the response has started: the connection is cut
        finally:
            handoff.close()
            await worker

    return StreamingResponse(body(), media_type="application/octet-stream")


async def upload(request: Request) -> Response:
    try:
        written = await _upload(request)
    except BodyTooLarge:
        raise  # the body limit's own 413, answered by its middleware
    except Exception as exc:
        await _drain(request)
        return e2b_error(exc)
    return JSONResponse([_write_info(w) for w in written])


async def _drain(request: Request) -> None:
    """Read what is left of a refused upload's body, up to ``DRAIN_BYTES``: a client
    still sending it (a refusal of its headers comes before its body is read) then
    reads the answer, not a connection reset. Past the bound, it is answered anyway."""
    drained = 0
    with contextlib.suppress(RuntimeError, ClientDisconnect):  # already read: nothing left
        async for chunk in request.stream():
            drained += len(chunk)
            if drained > DRAIN_BYTES:
                return


DRAIN_BYTES = 1 << 20


def _write_info(written: Written) -> dict[str, object]:
    info: dict[str, object] = {"name": written.name, "type": "file", "path": written.path}
    if written.metadata:
        info["metadata"] = written.metadata
    return info


def _metadata(request: Request, services: Services) -> dict[str, str]:
    """envd's ``X-Metadata-<key>: <value>`` headers (the key lowercased, the first of a
    repeated one), checked against the limits before anything is written."""
    found: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower().removeprefix(METADATA_HEADER)
        if key != name.lower() and key:
            found.setdefault(key, value)
    metadata.check(found, services.user_files.metadata_limits)
    return found


async def _upload(request: Request) -> list[Written]:
    who = _who(request)
    call = CALL.get()
    services = _services(request)
    file_metadata = _metadata(request, services)
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        return await _write_parts(request, content_type, who, file_metadata)
    if content_type.startswith("application/octet-stream"):
        path = request.query_params.get("path")
        if not path:
            raise refuse(400, "the path query parameter is required with application/octet-stream")
        stream = request.stream().__aiter__()
        gzip = request.headers.get("content-encoding", "").lower() == "gzip"
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
        limit = services.settings.e2b.max_upload_bytes
        total = 0

        async def next_piece() -> bytes | None:
            """The next piece of the file: at most ``CHUNK`` inflated at a time, so a
            small gzip body that inflates to gigabytes is refused at the limit."""
            if inflate is not None and inflate.unconsumed_tail:
                return inflate.decompress(inflate.unconsumed_tail, CHUNK)
            try:
                chunk = await stream.__anext__()
            except StopAsyncIteration:
                return inflate.flush() or None if inflate is not None else None
            return inflate.decompress(chunk, CHUNK) if inflate is not None else chunk

        async def next_chunk() -> bytes | None:
            nonlocal total
            piece = await next_piece()
            total += len(piece or b"")
            if total > limit:
                msg = f"the file is over the upload limit of {limit} bytes"
                raise refuse(413, msg + " (SIESTA_E2B__MAX_UPLOAD_BYTES)")
            return piece

        def chunks() -> bytes | None:
            return from_thread.run(next_chunk)

        written = await to_thread.run_sync(
            lambda: call.at_door(
                services,
                "uploadFile",
                {"path": path},
                lambda: services.user_files.write(who, path, _once_none(chunks), file_metadata),
            )
        )
        return [written]
    raise refuse(
        400, f"unsupported content type {content_type!r} (multipart/form-data or octet-stream)"
    )


async def _write_parts(
    request: Request, content_type: str, who: AsUser, file_metadata: dict[str, str]
) -> list[Written]:
    """Each part named ``file`` streamed into the sandbox as it arrives, nothing spooled
    here: the first to ``?path=`` when given (the SDKs give it with one file; that part
    may be a plain field without a file name, as a browser's ``FormData.append('file',
    text)`` sends, and envd takes it), every other to its file name, each given
    ``file_metadata``. Other fields are read and dropped (at most ``MAX_FIELD_BYTES``
    each); a part that fails leaves the earlier ones written."""
    services = _services(request)
    call = CALL.get()
    single_path = request.query_params.get("path")
    events = parts(content_type, request.stream())
    written: list[Written] = []
    named: set[str] = set()
    fields = 0
    async for event in events:
        if not isinstance(event, PartStart):
            continue  # a part's bytes and end come after its start: none are stray
        to_path = bool(single_path) and not written
        if event.name != "file" or (event.filename is None and not to_path):
            fields += 1
            await _skip_field(events, fields)
            continue
        path = single_path if single_path and not written else event.filename
        if not path:
            raise refuse(400, "each part's filename must be the file's path")
        if path in named:
            raise refuse(400, "two parts name the same path")
        if len(written) >= MAX_FILES:
            raise refuse(400, f"more than {MAX_FILES} files in one upload")
        named.add(path)
        chunks = _PartChunks(events, services.settings.e2b.max_upload_bytes)
        written.append(
            await to_thread.run_sync(
                _write_at_door, services, call, who, path, chunks.next_sync, file_metadata
            )
        )
    if not written:
        raise refuse(400, "no multipart part named 'file'")
    return written


class _PartChunks:
    """One file part's bytes, for a worker thread: ``None`` at the part's end."""

    def __init__(self, events: AsyncIterator[Event], limit: int) -> None:
        self._events = events
        self._limit = limit
        self._total = 0
        self._done = False

    async def next(self) -> bytes | None:
        if self._done:
            return None
        event = await anext(self._events, None)
        if event is None:
            raise refuse(400, "the multipart body ended inside a file part")
        if isinstance(event, PartEnd):
            self._done = True
            return None
        assert isinstance(event, PartData)  # a part does not start inside another
        self._total += len(event.data)
        if self._total > self._limit:
            msg = f"the file is over the upload limit of {self._limit} bytes"
            raise refuse(413, msg + " (SIESTA_E2B__MAX_UPLOAD_BYTES)")
        return event.data

    def next_sync(self) -> bytes | None:
        return from_thread.run(self.next)


def _write_at_door(
    services: Services,
    call: EnvdCall,
    who: AsUser,
    path: str,
    chunks: Callable[[], bytes | None],
    file_metadata: dict[str, str],
) -> Written:
    """One part's file written as ``uploadFile`` at the door."""
    return call.at_door(
        services,
        "uploadFile",
        {"path": path},
        lambda: services.user_files.write(who, path, chunks, file_metadata),
    )


async def _skip_field(events: AsyncIterator[Event], fields: int) -> None:
    if fields > MAX_FIELDS:
        raise refuse(400, f"more than {MAX_FIELDS} form fields in one upload")
    size = 0
    async for event in events:
        if isinstance(event, PartEnd):
            return
        if isinstance(event, PartData):
            size += len(event.data)
            if size > MAX_FIELD_BYTES:
                raise refuse(400, f"a form field over {MAX_FIELD_BYTES} bytes")


def _once_none(chunks: Callable[[], bytes | None]) -> Callable[[], bytes | None]:
    """``chunks`` that keeps answering ``None`` once it has."""
    done = False

    def next_chunk() -> bytes | None:
        nonlocal done
        if done:
            return None
        chunk = chunks()
        done = chunk is None
        return chunk

    return next_chunk


ROUTES = [
    Route("/health", health, methods=["GET"]),
    Route("/files", download, methods=["GET"]),
    Route("/files", upload, methods=["POST"]),
]
