"""An HTTP upstream on this host for egress tests, and the settings that let a
service's egress proxy (which runs on the host) reach it under test host names."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving_ok() -> Iterator[int]:
    """An HTTP server on loopback answering ``200 ok`` to every GET; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def egress_to(port: int, *names: str) -> dict[str, str]:
    """Service settings: egress on, allowing ``NAME:port`` for each name, each name
    pinned to loopback (a private address the deployment allows for the test)."""
    return {
        "SIESTA_EGRESS__ALLOW": ",".join(f"{name}:{port}" for name in names),
        "SIESTA_EGRESS__HOSTS": json.dumps({name: "127.0.0.1" for name in names}),
        "SIESTA_EGRESS__ALLOWED_PRIVATE_NETWORKS": '["127.0.0.0/8"]',
    }
