"""A real local HTTP server playing the agent backend and an OpenAI-compatible API.

Sub-agents (both APIs): ``echo`` answers at once, ``slow`` after 1 s, ``hang``
never in time (60 s), ``gate`` when the test opens the gate, ``fail`` with HTTP
500; other names are unknown (404). ``max_in_flight`` is the most requests it
was answering at once (tests reset it to 0).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DELAYS = {"echo": 0.0, "slow": 1.0, "hang": 60.0, "gate": 0.0}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class AgentServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.gate = threading.Event()
        self.max_in_flight = 0
        self._in_flight = 0
        self._count_lock = threading.Lock()
        handler = self._handler()
        self._server = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _entered(self) -> None:
        with self._count_lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _left(self) -> None:
        with self._count_lock:
            self._in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        requests = self.requests
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                )
                if self.path == "/subagents":
                    name, prompt = body["agent"], body["prompt"]
                elif self.path == "/v1/chat/completions":
                    name = body["model"]
                    prompt = " | ".join(m["content"] for m in body["messages"])
                else:
                    self._answer(404, {"error": "no such path"})
                    return
                if name == "fail":
                    self._answer(500, {"error": "backend exploded"})
                    return
                if name not in DELAYS:
                    self._answer(404, {"error": f"no agent {name}"})
                    return
                server._entered()
                try:
                    if name == "gate":
                        server.gate.wait(60)
                    time.sleep(DELAYS[name])
                finally:
                    server._left()
                text = f"{name}: {prompt}"
                if self.path == "/subagents":
                    self._answer(200, {"response": text})
                else:
                    self._answer(200, {"choices": [{"message": {"content": text}}]})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller gave up (a timeout test)

        return Handler
