"""E2B's multipart uploads stream into the sandbox as they arrive: nothing is spooled on
the service's disk, a file reaches the sandbox before the body has all come, and a file
over the upload limit is refused at the limit, naming it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.requests import Request
from starlette.types import Message

from api.e2b import files
from api.e2b.envd import CALL, EnvdCall
from api.limits import BodySizeLimit
from runtime.core.context import CallContext
from runtime.sandbox.metadata import MetadataLimits
from runtime.sandbox.user_files import AsUser, Written

BOUNDARY = "siesta-test-boundary"
MESSAGE_BYTES = 64 * 1024
MIB = 1024 * 1024


class Sandbox:
    """``user_files`` that records when each chunk came (how much body had arrived)."""

    metadata_limits = MetadataLimits(max_keys=100, max_bytes=4096)

    def __init__(self, body: Body) -> None:
        self._body = body
        self.written: dict[str, bytes] = {}
        self.first_chunk_at: dict[str, int] = {}

    def write(
        self,
        who: AsUser,
        path: str,
        chunks: Callable[[], bytes | None],
        file_metadata: dict[str, str] | None = None,
    ) -> Written:
        data = bytearray()
        while (chunk := chunks()) is not None:
            self.first_chunk_at.setdefault(path, self._body.delivered)
            data += chunk
        self.written[path] = bytes(data)
        name = path.rsplit("/", 1)[-1]
        return Written(name=name, path=f"/home/user/{path}", metadata=file_metadata or {})


class Body:
    """The request body as the server receives it: one message at a time, counted."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.delivered = 0
        self.total = -(-len(data) // MESSAGE_BYTES)

    async def receive(self) -> Message:
        start = self.delivered * MESSAGE_BYTES
        self.delivered += 1
        chunk = self._data[start : start + MESSAGE_BYTES]
        more = start + MESSAGE_BYTES < len(self._data)
        return {"type": "http.request", "body": chunk, "more_body": more}


def multipart(parts: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (
            f'; filename="{filename}"' if filename is not None else ""
        )
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        out += data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def upload(body: bytes, query: str = "", limit: int = 64 * MIB) -> tuple[Any, Sandbox, Body]:
    received = Body(body)
    sandbox = Sandbox(received)
    services = SimpleNamespace(
        settings=SimpleNamespace(e2b=SimpleNamespace(max_upload_bytes=limit)), user_files=sandbox
    )
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/files",
        "query_string": query.encode(),
        "headers": [(b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode())],
        "app": SimpleNamespace(state=SimpleNamespace(services=services)),
    }
    ctx = CallContext(org="org-a", user="backend", conversation="sbx1")
    call = SimpleNamespace(
        user="user",
        who=SimpleNamespace(ctx=ctx),
        at_door=lambda services, function, arguments, run, content=b"": run(),
    )

    async def scenario() -> Any:
        CALL.set(call)  # type: ignore[arg-type]
        return await files.upload(Request(scope, received.receive))

    return asyncio.run(scenario()), sandbox, received


def test_a_file_reaches_the_sandbox_before_the_body_has_all_come() -> None:
    big = bytes(range(256)) * (16 * 1024)  # 4 MiB
    answer, sandbox, body = upload(multipart([("file", "a.bin", big), ("file", "b.txt", b"b")]))
    assert answer.status_code == 200
    assert json.loads(answer.body) == [
        {"name": "a.bin", "type": "file", "path": "/home/user/a.bin"},
        {"name": "b.txt", "type": "file", "path": "/home/user/b.txt"},
    ]
    assert sandbox.written == {"a.bin": big, "b.txt": b"b"}
    # Streamed: the first bytes went in after a message or two of 64 messages, not
    # after the whole body was read (and spooled) as a form parser does.
    assert body.total > 60
    assert sandbox.first_chunk_at["a.bin"] <= 2


def test_the_path_query_names_a_single_files_path() -> None:
    answer, sandbox, _ = upload(multipart([("file", "ignored", b"x")]), "path=notes/a.txt")
    assert answer.status_code == 200
    assert sandbox.written == {"notes/a.txt": b"x"}


def test_other_fields_are_read_and_dropped() -> None:
    parts = [("meta", None, b"m" * 1000), ("file", "f.txt", b"f"), ("file", None, b"field")]
    answer, sandbox, _ = upload(multipart(parts))
    assert answer.status_code == 200
    assert sandbox.written == {"f.txt": b"f"}


def test_a_file_over_the_upload_limit_is_refused_at_the_limit() -> None:
    answer, sandbox, body = upload(multipart([("file", "big.bin", b"z" * 4 * MIB)]), limit=MIB)
    assert answer.status_code == 413
    message = json.loads(answer.body)["message"]
    assert str(MIB) in message and "SIESTA_E2B__MAX_UPLOAD_BYTES" in message
    assert body.delivered < body.total  # refused as it came, not after reading it all
    assert "big.bin" not in sandbox.written


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (multipart([]), "no multipart part named 'file'"),
        (multipart([("file", "", b"x")]), "filename must be the file's path"),
        (multipart([("file", "a", b"1"), ("file", "a", b"2")]), "two parts name the same path"),
        (multipart([("file", "a", b"1")])[:-30], "ended"),
    ],
)
def test_a_bad_multipart_body_is_a_400(body: bytes, says: str) -> None:
    answer, _, _ = upload(body)
    assert answer.status_code == 400
    assert says in json.loads(answer.body)["message"]


def test_envd_call_is_what_the_stub_stands_for() -> None:
    assert {"user", "who", "at_door"} <= {f.name for f in fields(EnvdCall)} | set(dir(EnvdCall))


def test_a_body_over_the_services_limit_is_its_413_not_a_500() -> None:
    """The body limit (``SIESTA_E2B__MAX_UPLOAD_BYTES`` + 1 MiB) cuts a chunked upload
    that declared no length: its refusal comes through the streaming upload whole."""
    body = Body(multipart([("file", "a.bin", b"a" * 3 * MIB)]))
    sandbox = Sandbox(body)
    services = SimpleNamespace(
        settings=SimpleNamespace(e2b=SimpleNamespace(max_upload_bytes=64 * MIB)),
        user_files=sandbox,
    )
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/e2b/envd/files",
        "query_string": b"",
        "headers": [(b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode())],
        "app": SimpleNamespace(state=SimpleNamespace(services=services)),
    }
    sent: list[Message] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        call = SimpleNamespace(
            user="user",
            who=SimpleNamespace(ctx=CallContext(org="o", user="u", conversation="sbx1")),
            at_door=lambda services, function, arguments, run, content=b"": run(),
        )
        CALL.set(call)  # type: ignore[arg-type]
        response = await files.upload(Request(scope, receive))
        await response(scope, receive, send)

    async def send(message: Message) -> None:
        sent.append(message)

    limited = BodySizeLimit(app, max_bytes=1024, upload_max_bytes=1024, e2b_upload_max_bytes=MIB)
    asyncio.run(limited(scope, body.receive, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["limit"] == MIB
