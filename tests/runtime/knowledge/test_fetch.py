"""Documents by URL: only from hosts the egress allowlist lists (redirects included),
through the address policy, never read past the document limit."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from runtime.core.errors import UrlNotAllowed
from runtime.core.network_rules import Allowlist
from runtime.egress.outbound import CheckedBackend, checked_transport
from runtime.knowledge.errors import DocumentTooLarge
from runtime.knowledge.fetch import DocumentFetcher


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/away":
            self.send_response(302)
            self.send_header("Location", "http://elsewhere.test/page")
            self.end_headers()
            return
        body = b"# Handbook\n\n" + b"x" * (5000 if self.path == "/big" else 10)
        self.send_response(200)
        self.send_header("Content-Type", "text/markdown; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def fetcher(port: int, *, allow_private: bool = True) -> DocumentFetcher:
    transport = checked_transport(CheckedBackend(allow_private=allow_private))
    client = httpx.Client(transport=transport)
    return DocumentFetcher(client, Allowlist.parse([f"127.0.0.1:{port}"]), timeout=5)


def test_a_listed_host_is_fetched_with_its_type(port: int) -> None:
    data, content_type, final = fetcher(port).fetch(f"http://127.0.0.1:{port}/doc", 1000)
    assert data.startswith(b"# Handbook") and content_type == "text/markdown"
    assert final == f"http://127.0.0.1:{port}/doc"


def test_what_the_allowlist_does_not_list_is_refused_redirects_too(port: int) -> None:
    with pytest.raises(UrlNotAllowed, match="SIESTA_EGRESS__ALLOW"):
        fetcher(port).fetch("http://example.com/doc", 1000)
    with pytest.raises(UrlNotAllowed, match=r"elsewhere\.test"):
        fetcher(port).fetch(f"http://127.0.0.1:{port}/away", 1000)
    with pytest.raises(UrlNotAllowed, match="loopback"):  # the address policy still holds
        fetcher(port, allow_private=False).fetch(f"http://127.0.0.1:{port}/doc", 1000)
    with pytest.raises(UrlNotAllowed, match="only http and https"):
        fetcher(port).fetch("file:///etc/passwd", 1000)


def test_a_body_past_the_limit_is_not_read_on(port: int) -> None:
    with pytest.raises(DocumentTooLarge, match="SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES"):
        fetcher(port).fetch(f"http://127.0.0.1:{port}/big", 1000)
