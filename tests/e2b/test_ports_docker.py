"""A sandbox's ports in E2B's host form, through the stock ``e2b`` SDK: the host
``sandbox.get_host(port)`` builds (``PORT-SANDBOXID.DOMAIN``, the domain the service
answers) reaches the port over HTTP and WebSocket when sent to the service; a sandbox
made with ``allow_public_traffic=False`` wants its traffic access token."""

from __future__ import annotations

import shlex
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
import websocket
from e2b import Sandbox
from e2b.sandbox.sandbox_api import SandboxLifecycle

from tests.e2b.conftest import TOKEN_A, TOKEN_B, E2bService
from tests.helpers import StartService, tokens_setting

pytestmark = [pytest.mark.docker]

DOMAIN = "ports.siesta.test"
MAX_CONNECTIONS = 2
MUTE = """
import socket, time
server = socket.socket()
server.bind(("127.0.0.1", 9000))
server.listen(16)  # connections wait in the backlog, never accepted nor answered
time.sleep(3600)
"""
LISTENING = """
import socket, time
while True:
    try:
        socket.create_connection(("127.0.0.1", 9000)).close()
        break
    except OSError:
        time.sleep(0.05)
"""
ECHO = """
import base64, hashlib, socket, struct
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 8765))
server.listen(8)
while True:
    c = server.accept()[0]
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        chunk = c.recv(4096)
        if not chunk:
            break
        head += chunk
    if b"\\r\\n\\r\\n" not in head:  # a probe that only connects: no busy loop on it
        c.close()
        continue
    key = next(l.split(":", 1)[1].strip() for l in head.decode().split("\\r\\n")
               if l.lower().startswith("sec-websocket-key"))
    guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    accept = base64.b64encode(hashlib.sha1((key + guid).encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n"
              b"Connection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\n\\r\\n")
    first, second = c.recv(2)
    mask = c.recv(4)
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(c.recv(second & 127)))
    c.sendall(bytes([0x81, len(payload) + 6]) + b"echo: " + payload)
    c.close()
"""


@pytest.fixture(scope="module")
def e2b_ports(start_service: StartService, docker_client: object) -> E2bService:
    tokens = tokens_setting(
        ("e2b-a", TOKEN_A, ["sandbox"], "org-ports-a"), ("e2b-b", TOKEN_B, ["sandbox"], "org-b")
    )
    return E2bService(
        start_service(
            "docker",
            SIESTA_TOKENS=tokens,
            SIESTA_E2B__PORTS_DOMAIN=DOMAIN,
            SIESTA_PORTS__MAX_CONNECTIONS_PER_SANDBOX=str(MAX_CONNECTIONS),
        )
    )


@pytest.fixture
def sandbox(e2b_ports: E2bService) -> Iterator[Sandbox]:
    made = Sandbox.create("base", **e2b_ports.options())
    yield made
    Sandbox.kill(made.sandbox_id, **e2b_ports.options())


def get(e2b: E2bService, host: str, path: str = "/", **headers: str) -> httpx.Response:
    return httpx.get(e2b.service.base_url + path, headers={"Host": host, **headers}, timeout=60)


def until_listening(e2b: E2bService, host: str, **headers: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while (response := get(e2b, host, **headers)).status_code == 502:
        assert time.monotonic() < deadline, response.text
        time.sleep(0.1)
    return response


def test_get_host_reaches_the_port_over_http_and_websocket(
    e2b_ports: E2bService, sandbox: Sandbox
) -> None:
    host = sandbox.get_host(8000)
    assert host == f"8000-{sandbox.sandbox_id}.{DOMAIN}"
    assert get(e2b_ports, host).json()["error"]["code"] == "port_not_listening"

    sandbox.files.write("site/hello.txt", "hello from the sandbox")
    sandbox.commands.run("cd site && python3 -m http.server 8000", background=True, timeout=0)
    assert until_listening(e2b_ports, host).status_code == 200
    assert get(e2b_ports, host, "/hello.txt").text == "hello from the sandbox"

    # Requests to a server that never answers hold their connections: past the limit,
    # the next request to the sandbox is refused, naming it. Their clients then go away
    # mid-upload: that ends their connections at once (not at the idle limit, 300 s).
    sandbox.files.write("mute.py", MUTE)
    sandbox.commands.run("python3 mute.py", background=True, timeout=0)
    sandbox.commands.run(f"python3 -c {shlex.quote(LISTENING)}", timeout=30)
    held = [hold_a_connection(e2b_ports, sandbox.get_host(9000)) for _ in range(MAX_CONNECTIONS)]
    try:
        deadline = time.monotonic() + 30  # until both have opened theirs in the sandbox
        while (refused := get(e2b_ports, host, "/hello.txt")).status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert refused.status_code == 503
        error = refused.json()["error"]
        assert (error["code"], error["limit"]) == ("too_many_port_connections", MAX_CONNECTIONS)
        assert "SIESTA_PORTS__MAX_CONNECTIONS_PER_SANDBOX" in error["message"]
    finally:
        for connection in held:
            connection.close()
    deadline = time.monotonic() + 30
    while (answer := get(e2b_ports, host, "/hello.txt")).status_code == 503:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.1)
    assert answer.status_code == 200

    sandbox.files.write("echo.py", ECHO)
    sandbox.commands.run("python3 echo.py", background=True, timeout=0)
    ws_host = sandbox.get_host(8765)
    url = e2b_ports.service.base_url.replace("http", "ws") + "/"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket = websocket.create_connection(url, host=ws_host, timeout=30)
            break
        except websocket.WebSocketBadStatusException as refused:
            assert refused.status_code == 502 and time.monotonic() < deadline
            time.sleep(0.1)
    try:
        socket.send("hi")
        assert socket.recv() == "echo: hi"
    finally:
        socket.close()


def hold_a_connection(e2b: E2bService, host: str) -> socket.socket:
    """An upload the server never answers, its body a tenth sent: its connection to the
    port stays open until the client goes away."""
    url = httpx.URL(e2b.service.base_url)
    held = socket.create_connection((url.host, url.port or 80))
    head = f"POST /upload HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100000\r\n\r\n"
    held.sendall(head.encode() + b"x" * 10000)
    return held


def test_private_traffic_needs_the_traffic_access_token(e2b_ports: E2bService) -> None:
    sandbox = Sandbox.create("base", network={"allow_public_traffic": False}, **e2b_ports.options())
    try:
        token = sandbox.traffic_access_token
        assert token
        sandbox.commands.run("python3 -m http.server 8000", background=True, timeout=0)
        host = sandbox.get_host(8000)
        assert until_listening(e2b_ports, host, **{"e2b-traffic-access-token": token}).is_success
        refused = get(e2b_ports, host)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "traffic_token_refused"
        wrong = get(e2b_ports, host, **{"e2b-traffic-access-token": token[:-2] + "xx"})
        assert wrong.status_code == 403
        # The same token opens nothing of another sandbox.
        other = Sandbox.create(
            "base", network={"allow_public_traffic": False}, **e2b_ports.options(TOKEN_B)
        )
        try:
            answer = get(e2b_ports, other.get_host(8000), **{"e2b-traffic-access-token": token})
            assert answer.status_code == 403
        finally:
            other.kill()
    finally:
        sandbox.kill()


def test_traffic_resumes_a_paused_sandbox_created_with_auto_resume(
    e2b_ports: E2bService,
) -> None:
    lifecycle: SandboxLifecycle = {"on_timeout": "pause", "auto_resume": True}
    sandbox = Sandbox.create("base", lifecycle=lifecycle, **e2b_ports.options())
    plain = Sandbox.create("base", lifecycle={"on_timeout": "pause"}, **e2b_ports.options())
    try:
        for made in (sandbox, plain):
            made.files.write("site/page.txt", f"served by {made.sandbox_id}")
            made.commands.run("cd site && python3 -m http.server 8000", background=True, timeout=0)
            assert until_listening(e2b_ports, made.get_host(8000)).status_code == 200
            assert made.pause()
            assert Sandbox.get_info(made.sandbox_id, **e2b_ports.options()).state == "paused"

        woken = get(e2b_ports, sandbox.get_host(8000), "/page.txt")
        # The server kept running through the pause: the request reaches it at once.
        assert woken.status_code == 200 and woken.text == f"served by {sandbox.sandbox_id}"
        info = Sandbox.get_info(sandbox.sandbox_id, **e2b_ports.options())
        assert info.state == "running"
        assert info.lifecycle == {"on_timeout": "pause", "auto_resume": True}

        # Without auto-resume, traffic does not wake it (E2B's behaviour): connect does.
        asleep = get(e2b_ports, plain.get_host(8000), "/page.txt")
        assert asleep.status_code == 404
        assert asleep.json()["error"]["code"] == "port_sandbox_not_found"
        assert Sandbox.get_info(plain.sandbox_id, **e2b_ports.options()).state == "paused"
    finally:
        sandbox.kill()
        plain.kill()
    # Killed: E2B's edge answer, word for word (the JS SDK's own tests read it).
    gone = get(e2b_ports, plain.get_host(3000), "/")
    assert (gone.status_code, gone.json()) == (
        502,
        {"sandboxId": plain.sandbox_id, "message": "The sandbox was not found", "code": 502},
    )


HOST_ECHO = """
from http.server import BaseHTTPRequestHandler, HTTPServer

class Echo(BaseHTTPRequestHandler):
    def do_GET(self):
        body = (self.headers["Host"] + "|" + ",".join(self.headers.keys())).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

HTTPServer(("127.0.0.1", 8080), Echo).serve_forever()
"""


def test_the_server_sees_the_masked_host_when_asked(e2b_ports: E2bService) -> None:
    with pytest.raises(Exception, match="maskRequestHost"):  # a header must stay one
        Sandbox.create(
            "base", network={"mask_request_host": "evil\r\nX-Injected: 1"}, **e2b_ports.options()
        )
    masked = Sandbox.create(
        "base",
        network={"mask_request_host": "custom-host.example.com:${PORT}"},
        **e2b_ports.options(),
    )
    plain = Sandbox.create("base", **e2b_ports.options())
    try:
        for sandbox in (masked, plain):
            sandbox.files.write("host.py", HOST_ECHO)
            sandbox.commands.run("python3 host.py", background=True, timeout=0)
        seen, names = until_listening(e2b_ports, masked.get_host(8080)).text.split("|")
        assert seen == "custom-host.example.com:8080"
        # Names in their canonical case, as E2B's proxy sends them (apps compare them).
        assert {"Host", "User-Agent", "X-Forwarded-For"} <= set(names.split(",")), names
        assert until_listening(e2b_ports, plain.get_host(8080)).text.startswith("localhost:8080|")
        # A fork keeps its source's mask, as it keeps its network options.
        (fork,) = masked.fork()
        assert isinstance(fork, Sandbox), fork
        try:
            fork.commands.run("python3 host.py", background=True, timeout=0)
            assert until_listening(e2b_ports, fork.get_host(8080)).text.startswith(seen + "|")
        finally:
            fork.kill()
    finally:
        masked.kill()
        plain.kill()
