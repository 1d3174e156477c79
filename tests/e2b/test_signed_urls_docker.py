"""Signed file URLs of the stock ``e2b`` SDK (``download_url``, ``upload_url``): fetched
with no header at all, as a browser or ``curl`` would, on the path form the SDK builds
from ``E2B_SANDBOX_URL`` (``ORIGIN/files?...``) and on ``/e2b/envd/files``."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from e2b import Sandbox

from tests.e2b.conftest import E2bService

pytestmark = [pytest.mark.docker]


@pytest.fixture
def sandbox(e2b: E2bService) -> Iterator[Sandbox]:
    made = Sandbox.create("base", secure=True, **e2b.options())
    yield made
    Sandbox.kill(made.sandbox_id, **e2b.options())


def test_a_signed_url_downloads_and_uploads_with_no_token_and_expires(sandbox: Sandbox) -> None:
    sandbox.files.write("notes.txt", "signed content")

    plain = sandbox.download_url("notes.txt", "user")
    assert "signature=v1_" in plain
    assert httpx.get(plain).text == "signed content"
    lasting = sandbox.download_url("notes.txt", "user", use_signature_expiration=120)
    assert httpx.get(lasting).text == "signed content"

    expired = httpx.get(sandbox.download_url("notes.txt", "user", use_signature_expiration=-120))
    assert (expired.status_code, expired.json()) == (
        401,
        {"code": 401, "message": "signature is already expired"},
    )
    # The signature binds the path, the operation and the user: none can be changed.
    for tampered in (
        plain.replace("notes.txt", "other.txt"),
        plain.replace("username=user", "username=root"),
    ):
        refused = httpx.get(tampered)
        assert (refused.status_code, refused.json()["message"]) == (401, "invalid signature")
    assert httpx.post(plain, files={"file": ("x", b"x")}).status_code == 401  # read-only
    unsigned = plain.split("&signature=")[0]
    assert httpx.get(unsigned).status_code == 401

    upload = sandbox.upload_url("uploaded.txt", "user")
    sent = httpx.post(upload, files={"file": ("uploaded.txt", b"sent by url")})
    assert sent.status_code == 200, sent.text
    assert sandbox.files.read("uploaded.txt") == "sent by url"
    assert sandbox.commands.run("stat -c %U uploaded.txt").stdout == "user\n"
    # A form field rather than a file part (the JS SDK's tests send FormData text so).
    field = httpx.post(upload, files={"file": (None, b"sent as a field")})
    assert field.status_code == 200, field.text
    assert sandbox.files.read("uploaded.txt") == "sent as a field"

    # The same URL on envd's own path, the sandbox named by its header.
    parts = urlsplit(plain)
    envd = f"{parts.scheme}://{parts.netloc}/e2b/envd/files?{parts.query}"
    named = httpx.get(envd, headers={"E2b-Sandbox-Id": sandbox.sandbox_id})
    assert named.text == "signed content"
