"""envd's plain HTTP routes: ``GET /health``, ``GET /files`` and ``POST /files``.

Files move through ``runtime.sandbox.user_files`` (``cat`` as the user, in the sandbox) in
chunks: a download is streamed to the client as the sandbox reads it (a few
chunks ahead of a slow client at most), an octet-stream upload into the sandbox as
it arrives; a multipart upload is spooled to a temporary file first (the form
parser's way), then streamed in. Errors are envd's
``{"code", "message"}`` with the statuses its SDKs map (404 missing, 400 a folder,
401 no such user, 507 a full disk).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from anyio import from_thread, to_thread
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from api.e2b.envd import CALL, EnvdCall, checked_user
from api.e2b.errors import e2b_error, refuse
from runtime.core.errors import Cancelled
from runtime.sandbox.user_files import AsUser, Written
from runtime.services import Services

CHUNK = 256 * 1024
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
    except Exception as exc:
        return e2b_error(exc)
    return JSONResponse([{"name": w.name, "type": "file", "path": w.path} for w in written])


async def _upload(request: Request) -> list[Written]:
    who = _who(request)
    call = CALL.get()
    services = _services(request)
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        # File parts are spooled to disk whole (their size is the body's, which the
        # service's body limit caps); other fields are held in memory: 1 MiB at most.
        form = await request.form(max_files=1000, max_part_size=1024 * 1024)
        try:
            files = [part for name, part in form.multi_items() if name == "file"]
            return await _write_parts(request, files, who)
        finally:
            await form.close()
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
                lambda: services.user_files.write(who, path, _once_none(chunks)),
            )
        )
        return [written]
    raise refuse(
        400, f"unsupported content type {content_type!r} (multipart/form-data or octet-stream)"
    )


async def _write_parts(request: Request, parts: list[Any], who: AsUser) -> list[Written]:
    services = _services(request)
    call = CALL.get()
    single_path = request.query_params.get("path")
    uploads = [part for part in parts if isinstance(part, UploadFile)]
    if not uploads:
        raise refuse(400, "no multipart part named 'file'")
    paths = [
        single_path if single_path and len(uploads) == 1 else part.filename for part in uploads
    ]
    if any(not path for path in paths):
        raise refuse(400, "each part's filename must be the file's path")
    if len(set(paths)) != len(paths):
        raise refuse(400, "two parts name the same path")
    written = []
    for part, path in zip(uploads, paths, strict=True):
        assert path is not None
        written.append(await to_thread.run_sync(_write_at_door, services, call, who, path, part))
    return written


def _write_at_door(
    services: Services, call: EnvdCall, who: AsUser, path: str, part: UploadFile
) -> Written:
    """One part's file written as ``uploadFile`` at the door."""
    return call.at_door(
        services, "uploadFile", {"path": path}, lambda: _write_part(services, who, path, part.file)
    )


def _write_part(services: Services, who: AsUser, path: str, source: Any) -> Written:
    def chunks() -> bytes | None:
        data: bytes = source.read(CHUNK)
        return data or None

    return services.user_files.write(who, path, chunks)


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
