"""One local origin server for the egress tests: it answers with what it received."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest


class _Echo(http.server.BaseHTTPRequestHandler):
    """The request line's path, the Host header, any proxy credentials, and the local
    address the connection reached."""

    def do_GET(self) -> None:
        auth = self.headers["Proxy-Authorization"]
        local = self.connection.getsockname()[0]
        data = f"path={self.path} host={self.headers['Host']} auth={auth} local={local}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[int]:
    """The server's port on 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()
