"""Real local HTTP servers speaking the external APIs the tool adapters call:
Google Custom Search (and the result pages), Firecrawl, OpenAI Images, the
platform API and the connection gateway. Nothing leaves the machine.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
PAGE = """<html><head><title>Page A title</title>
<meta name="description" content="About page A"><script>var secret = 1;</script>
<style>p {color: red}</style></head><body><nav>Menu items</nav><header>Site header</header>
<h1>Heading A</h1><p>First paragraph of A.</p><ul><li>Point one</li></ul>
<iframe>frame</iframe><footer>Footer text</footer></body></html>"""
AGENTS = [
    {"id": "11111111-1111-1111-1111-111111111111", "name": "Writer"},
    {"id": "22222222-2222-2222-2222-222222222222", "name": "Twin"},
    {"id": "33333333-3333-3333-3333-333333333333", "name": "Twin"},
]

TASKS: dict[str, Any] = {
    "started": {"id": "t-2", "status": "InProgress"},  # auto-execution started it
    "odd id": {"taskId": "t 3/x"},
    "no id": {"summary": "no id"},
}
"""What the platform answers to Platform_CreateTask, by summary (else only an id)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class FakeApis:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.crawl_polls = 0
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        apis = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(
                self,
                status: int,
                body: Any,
                content_type: str = "application/json",
                headers: dict[str, str] | None = None,
            ) -> None:
                data = (
                    body
                    if isinstance(body, bytes)
                    else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                )
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                apis.requests.append(
                    {
                        "method": "GET",
                        "path": parts.path,
                        "query": query,
                        "headers": dict(self.headers),
                    }
                )
                if parts.path == "/customsearch/v1":
                    self._search(query)
                elif parts.path == "/pages/a":
                    self._send(200, PAGE, "text/html; charset=utf-8")
                elif parts.path == "/pages/slow":
                    time.sleep(float(query.get("delay", "3")))
                    self._send(200, PAGE, "text/html; charset=utf-8")
                elif parts.path == "/pages/redirect":
                    self._send(302, "", "text/plain", {"Location": "/pages/a"})
                elif parts.path == "/v1/crawl/job-1":
                    apis.crawl_polls += 1
                    if apis.crawl_polls < 2:
                        self._send(200, {"success": True, "status": "scraping"})
                    else:
                        self._send(
                            200,
                            {
                                "success": True,
                                "status": "completed",
                                "data": [
                                    {"markdown": "# One", "metadata": {"sourceURL": "https://s/1"}},
                                    {"markdown": "# Two", "metadata": {"sourceURL": "https://s/2"}},
                                ],
                            },
                        )
                elif parts.path == "/v1/crawl/job-forever":
                    self._send(200, {"success": True, "status": "scraping"})
                elif parts.path == "/v1/crawl/job-failed":
                    self._send(200, {"success": True, "status": "failed"})
                elif parts.path == "/v1/crawl/job-empty":
                    self._send(200, {"success": True, "status": "completed", "data": []})
                else:
                    self._send(404, {"error": "not found"})

            def _search(self, query: dict[str, str]) -> None:
                if query.get("key") != "good-key":
                    self._send(403, {"error": {"code": 403, "message": "API key not valid"}})
                elif query.get("q") == "malformed":
                    self._send(200, "<html>oops</html>", "text/html")
                elif query.get("q") == "slow":
                    time.sleep(3)
                    self._send(200, {"items": []})
                elif query.get("q", "").startswith("delayed:"):
                    self._delayed_pages(query)
                else:
                    items = [
                        {"title": "A", "link": f"{apis.url}/pages/a", "snippet": "snip a"},
                        {
                            "title": "Gone",
                            "link": f"{apis.url}/pages/missing",
                            "snippet": "snip gone",
                        },
                    ]
                    self._send(200, {"items": items[: int(query.get("num", "10"))]})

            def _delayed_pages(self, query: dict[str, str]) -> None:
                """``q=delayed:<n>:<seconds>``: page A, then n pages that take that long."""
                _, count, delay = query["q"].split(":")
                items = [{"title": "A", "link": f"{apis.url}/pages/a", "snippet": "snip a"}]
                items += [
                    {
                        "title": f"Slow {i}",
                        "link": f"{apis.url}/pages/slow?delay={delay}&i={i}",
                        "snippet": f"snip slow {i}",
                    }
                    for i in range(int(count))
                ]
                self._send(200, {"items": items[: int(query.get("num", "10"))]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = urlsplit(self.path).path
                apis.requests.append(
                    {"method": "POST", "path": path, "body": body, "headers": dict(self.headers)}
                )
                if path.startswith("/v1/") and not self.headers.get("Authorization", "").endswith(
                    "good-key"
                ):
                    self._send(401, {"success": False, "error": "Unauthorized: bad key"})
                elif path == "/v1/scrape":
                    if "fail" in body["url"]:
                        self._send(500, {"success": False, "error": "Failed to scrape"})
                    else:
                        self._send(
                            200,
                            {
                                "success": True,
                                "data": {
                                    "markdown": "# Hello",
                                    "metadata": {"title": "Hello page"},
                                },
                            },
                        )
                elif path == "/v1/crawl":
                    job = next(
                        (
                            f"job-{kind}"
                            for kind in ("forever", "failed", "empty")
                            if kind in body["url"]
                        ),
                        "job-1",
                    )
                    self._send(200, {"success": True, "id": job})
                elif path == "/v1/map":
                    self._send(
                        200,
                        {"success": True, "links": ["https://s/1", "https://s/2", "https://s/3"]},
                    )
                elif path == "/v1/search":
                    self._send(
                        200,
                        {
                            "success": True,
                            "data": [{"url": "https://r/1", "title": "R1", "description": "d1"}],
                        },
                    )
                elif path == "/v1/images/generations":
                    self._images(body)
                elif path.startswith("/functions/"):
                    self._platform(path.removeprefix("/functions/"), body)
                elif path == "/connections":
                    self._send(200, {"result": {"sent": True, "function": body["function"]}})
                else:
                    self._send(404, {"error": "not found"})

            def _images(self, body: dict[str, Any]) -> None:
                if str(body.get("prompt")).startswith("slow"):
                    time.sleep(0.3)  # concurrent calls finish together
                if body.get("prompt") == "forbidden":
                    self._send(400, {"error": {"message": "Your request was rejected"}})
                elif body.get("prompt") == "not a png":
                    self._send(200, {"data": [{"b64_json": base64.b64encode(b"GIF89a").decode()}]})
                else:
                    self._send(200, {"data": [{"b64_json": base64.b64encode(PNG).decode()}]})

            def _platform(self, name: str, body: dict[str, Any]) -> None:
                if name == "Platform_ListAgents":
                    wanted = body["arguments"].get("search")
                    self._send(200, {"result": [a for a in AGENTS if a["name"] == wanted]})
                elif name == "Platform_CreateTask" and body["arguments"]["summary"] == "locked":
                    self._send(403, {"error": "the user cannot write to the task workspace"})
                elif name == "Platform_CreateTask":
                    self._send(
                        200, {"result": TASKS.get(body["arguments"]["summary"], {"id": "t-1"})}
                    )
                elif name == "Platform_GetAgent" and body["arguments"].get("id") == "missing":
                    self._send(404, {"error": "no such agent"})
                else:
                    self._send(200, {"result": {"function": name, **body["arguments"]}})

        return Handler
