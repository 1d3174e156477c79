"""A sandbox's ports through the service, on Docker: servers inside a sandbox with no
network are reached over its agent by HTTP (files, a large body, a POST body, many
requests at once, a stream of server-sent events) and WebSocket (both ways), behind a
port token; a closed port is 502; a paused sandbox is resumed by a request, a lost one
is not replaced; a port answers while a long command holds the conversation."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import websocket

from runtime.seams.providers import CONVERSATION_LABEL
from siesta_client import SiestaClient
from tests.helpers import (
    TOKEN,
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_reconcile,
    run_resources,
)

pytestmark = [pytest.mark.docker]

IMAGE = "python"
FILE_SERVER, APP_SERVER, ECHO_SERVER = 8001, 8000, 8765
BIG_BYTES = 1536 * 1024
IDLE_SECONDS = 5
"""The service's port idle limit here: short, so a test outlives it."""
APP = """
import hashlib, http.server, os, time

class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        seen = {name: self.headers.get(name) for name in (
            "Host", "X-Forwarded-Prefix", "Authorization", "X-Siesta-Port-Token",
            "X-Siesta-Org", "Cookie")}
        answer = (f"{len(body)} {hashlib.sha256(body).hexdigest()} " + repr(seen)).encode()
        self.send_response(201)
        self.send_header("Content-Length", str(len(answer)))
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):  # server-sent events: the second waits for /tmp/go
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: first\\n\\n")
        self.wfile.flush()
        while self.path == "/forever":  # until the client is gone
            time.sleep(0.2)
            self.wfile.write(b": still here\\n\\n")
            self.wfile.flush()
        while not os.path.exists("/tmp/go"):
            time.sleep(0.05)
        self.wfile.write(b"data: second\\n\\n")

http.server.ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
"""
ECHO = """
import base64, hashlib, socket, struct, threading, time

locks = {}

def exact(c, n):
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data

def send(c, op, payload):
    n = len(payload)
    size = bytes([n]) if n < 126 else bytes([126]) + struct.pack(">H", n) if n < 65536 \\
        else bytes([127]) + struct.pack(">Q", n)
    with locks.setdefault(c.fileno(), threading.Lock()):
        c.sendall(bytes([0x80 | op]) + size + payload)

def ping(c):  # /pings: a Ping every millisecond while the client talks
    try:
        while True:
            send(c, 9, b"ping")
            time.sleep(0.001)
    except OSError:
        pass

def serve(c):
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        chunk = c.recv(4096)
        if not chunk:  # a probe that only connects: no busy loop on its closed socket
            return
        head += chunk
    lines = head.decode().split("\\r\\n")
    key = next(l.split(":", 1)[1].strip() for l in lines
               if l.lower().startswith("sec-websocket-key"))
    guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    accept = base64.b64encode(hashlib.sha1((key + guid).encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n"
              b"Connection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\n\\r\\n")
    path = lines[0].split(" ")[1]
    send(c, 1, ("path " + path).encode())
    if path == "/pings":
        threading.Thread(target=ping, args=(c,), daemon=True).start()
    heard = 0
    while True:
        first, second = exact(c, 2)
        op, n = first & 15, second & 127
        if n == 126:
            n = struct.unpack(">H", exact(c, 2))[0]
        elif n == 127:
            n = struct.unpack(">Q", exact(c, 8))[0]
        mask = exact(c, 4)
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(exact(c, n)))
        if op == 8:
            send(c, 8, payload[:2])
            return
        if op == 10:  # a Pong
            continue
        if path == "/quiet":  # says nothing until asked how many messages it heard
            if payload != b"how many?":
                heard += 1
                continue
            payload = str(heard).encode()
        send(c, op, b"echo: " + payload if op == 1 else payload[::-1])

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 8765))
server.listen(64)
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
"""


@dataclass(frozen=True)
class Servers:
    service: ServiceProcess
    conversation: str
    big_sha256: str
    token: dict[str, str]
    """The conversation's port token, as the header a port request carries."""

    def url(self, port: int, tail: str = "") -> str:
        return f"/v1/conversations/{self.conversation}/ports/{port}/{tail}"


def sandbox_headers(org: str = "org-a") -> dict[str, str]:
    return headers(org=org, image=IMAGE)


def call(service: ServiceProcess, conversation: str, route: str, body: Any) -> Any:
    response = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/{route}", json=body, headers=sandbox_headers()
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


def until(check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def start_servers(service: ServiceProcess, conversation: str) -> tuple[str, dict[str, str]]:
    """The three servers in the sandbox, answering; the big file's sha256 and the
    port token's header."""
    call(service, conversation, "writeFile", {"path": "app.py", "content": APP})
    call(service, conversation, "writeFile", {"path": "echo.py", "content": ECHO})
    made = call(
        service,
        conversation,
        "runCommand",
        {"command": f"head -c {BIG_BYTES} /dev/urandom > big.bin && sha256sum big.bin"},
    )
    for command in (
        f"python3 -m http.server {FILE_SERVER} --bind 127.0.0.1",
        "python3 app.py",
        "python3 echo.py",
    ):
        call(service, conversation, "processes", {"command": command})

    access = service.client.get(
        f"/v1/conversations/{conversation}/sandbox/ports/{FILE_SERVER}", headers=sandbox_headers()
    )
    token = {"X-Siesta-Port-Token": access.json()["token"]}

    def answering() -> bool:
        for port in (FILE_SERVER, APP_SERVER):
            url = f"/v1/conversations/{conversation}/ports/{port}/"
            if service.client.post(url, headers=token).status_code == 502:
                return False
        return True

    until(answering)
    return str(made["stdout"].split()[0]), token


@pytest.fixture(scope="module")
def ports_service(start_service: StartService, docker_client: object) -> ServiceProcess:
    """The Docker service (this module's only one) with a short port idle limit."""
    return start_service("docker", SIESTA_PORTS__IDLE_TIMEOUT_SECONDS=str(IDLE_SECONDS))


@pytest.fixture(scope="module")
def servers(ports_service: ServiceProcess) -> Servers:
    conversation = new_conversation()
    return Servers(ports_service, conversation, *start_servers(ports_service, conversation))


def port_token(servers: Servers, port: int, org: str = "org-a") -> dict[str, Any]:
    response = servers.service.client.get(
        f"/v1/conversations/{servers.conversation}/sandbox/ports/{port}",
        headers=sandbox_headers(org),
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_files_and_a_large_body_come_through(servers: Servers) -> None:
    client = servers.service.client
    listing = client.get(servers.url(FILE_SERVER), headers=servers.token)
    assert listing.status_code == 200 and "app.py" in listing.text
    big = client.get(servers.url(FILE_SERVER, "big.bin"), headers=servers.token)
    assert big.status_code == 200
    assert int(big.headers["content-length"]) == len(big.content) == BIG_BYTES
    assert hashlib.sha256(big.content).hexdigest() == servers.big_sha256
    missing = client.get(servers.url(FILE_SERVER, "nothing?x=1"), headers=servers.token)
    assert missing.status_code == 404  # the server's own answer, passed on


def test_a_post_body_goes_in_and_service_credentials_stay_out(servers: Servers) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    response = servers.service.client.post(
        servers.url(APP_SERVER, "upload"), content=body, headers=servers.token
    )
    assert response.status_code == 201, response.text
    length, digest, seen = response.text.split(" ", 2)
    assert (int(length), digest) == (len(body), hashlib.sha256(body).hexdigest())
    assert f"'X-Forwarded-Prefix': '/v1/conversations/{servers.conversation}/ports/8000'" in seen
    assert "'Host': 'localhost:8000'" in seen
    assert "'Authorization': None" in seen and "'X-Siesta-Org': None" in seen
    # The path form is the service's origin: the server's cookies would be its cookies.
    assert "set-cookie" not in response.headers
    assert_inert(response)


def assert_inert(response: httpx.Response) -> None:
    """A path-form answer as a browser must get it: a page with no origin of ours."""
    assert response.headers["content-security-policy"] == "sandbox"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cross-origin-resource-policy"] == "same-origin"
    assert response.headers["cross-origin-opener-policy"] == "same-origin"


def test_twenty_requests_at_once(servers: Servers) -> None:
    def fetch(index: int) -> tuple[int, int]:
        with httpx.Client(base_url=servers.service.base_url, timeout=60) as client:
            body = f"request {index}".encode() * (index + 1)
            response = client.post(
                servers.url(APP_SERVER, f"n/{index}"), content=body, headers=servers.token
            )
            return response.status_code, int(response.text.split(" ")[0])

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(fetch, range(20)))
    assert answers == [(201, len(f"request {i}".encode()) * (i + 1)) for i in range(20)]


def test_server_sent_events_stream_while_commands_run(servers: Servers) -> None:
    client = servers.service.client
    with client.stream("GET", servers.url(APP_SERVER, "events"), headers=servers.token) as s:
        assert s.headers["content-type"] == "text/event-stream"
        lines = s.iter_lines()
        assert next(lines) == "data: first"
        # The open stream holds no lease: a command runs beside it, and lets it go on.
        call(servers.service, servers.conversation, "runCommand", {"command": "touch /tmp/go"})
        assert [line for line in lines if line] == ["data: second"]


def test_a_client_that_goes_away_ends_its_connection_in_the_sandbox(servers: Servers) -> None:
    client = servers.service.client
    with client.stream("GET", servers.url(APP_SERVER, "forever"), headers=servers.token) as s:
        lines = s.iter_lines()  # kept: a line iterator dropped closes the stream
        assert next(lines) == "data: first"
        until(lambda: connectors(servers) == 1)  # (an earlier test's may still be ending)

    until(lambda: connectors(servers) == 0)


def connectors(servers: Servers) -> int:
    """How many connections to a port are open in the sandbox (``siesta-fs connect``)."""
    command = "pgrep -c -f '^/usr/local/lib/siesta/[s]iesta-fs connect' || true"
    counted = call(servers.service, servers.conversation, "runCommand", {"command": command})
    return int(counted["stdout"].strip())


def test_a_port_nothing_listens_on_answers_502(servers: Servers) -> None:
    response = servers.service.client.get(servers.url(9), headers=servers.token)
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["code"], error["port"]) == ("port_not_listening", 9)
    assert port_token(servers, 9)["listening"] is False


def test_a_port_token_opens_the_port_and_nothing_else(servers: Servers) -> None:
    with SiestaClient(servers.service.base_url, TOKEN) as siesta:
        conversation = siesta.conversation(servers.conversation, org="org-a", user="user-1")
        access = conversation.port(FILE_SERVER).model_dump()
    assert access["listening"] is True
    assert access["path"] == f"/v1/conversations/{servers.conversation}/ports/{FILE_SERVER}/"
    page = servers.url(FILE_SERVER, "app.py")
    wrong = {"X-Siesta-Port-Token": access["token"] + "x"}
    with httpx.Client(base_url=servers.service.base_url, timeout=60) as browser:
        assert_inert(refused := browser.get(page))
        assert refused.status_code == 401
        assert browser.get(page, headers=wrong).status_code == 401
        right = browser.get(page, headers={"X-Siesta-Port-Token": access["token"]})
        assert right.status_code == 200
        assert_inert(right)
        # ?token= opens it, and sets no cookie on the service's origin.
        opened = browser.get(access["url"])
        assert opened.status_code == 200
        assert "set-cookie" not in opened.headers
        assert browser.get(page).status_code == 401
    # Another conversation's path, even of the same org: refused.
    other = new_conversation()
    call(servers.service, other, "runCommand", {"command": "true"})
    other_page = f"/v1/conversations/{other}/ports/{FILE_SERVER}/app.py"
    refused = servers.service.client.get(
        other_page, headers={"X-Siesta-Port-Token": access["token"]}
    )
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"


def test_another_org_never_reaches_the_port(servers: Servers) -> None:
    client = servers.service.client
    access = f"/v1/conversations/{servers.conversation}/sandbox/ports/{FILE_SERVER}"
    answer = client.get(access, headers=sandbox_headers("org-b"))
    assert answer.status_code == 404  # org B has no such conversation: no token for it
    assert answer.json()["error"]["code"] == "port_sandbox_not_found"
    # B's own conversation of the same id: its token opens B's sandbox, never A's.
    call_b = client.post(
        f"/v1/conversations/{servers.conversation}/sandbox/runCommand",
        headers=sandbox_headers("org-b"),
        json={"command": "true"},
    )
    assert call_b.status_code == 200, call_b.text
    b_token = client.get(access, headers=sandbox_headers("org-b")).json()["token"]
    assert b_token != servers.token["X-Siesta-Port-Token"]
    from_b = client.get(servers.url(FILE_SERVER), headers={"X-Siesta-Port-Token": b_token})
    assert from_b.status_code == 502  # nothing listens in B's sandbox
    # The bearer token opens no port, whatever its org.
    bearer = client.get(servers.url(FILE_SERVER), headers=sandbox_headers())
    assert bearer.status_code == 401


def test_a_websocket_relays_both_ways(servers: Servers) -> None:
    url = servers.service.base_url.replace("http", "ws") + servers.url(ECHO_SERVER, "chat?room=1")
    socket = websocket.create_connection(url, header=servers.token, timeout=30)
    try:
        assert socket.recv() == "path /chat?room=1"  # the server spoke first
        socket.send("hello")
        assert socket.recv() == "echo: hello"
        socket.send_binary(b"\x00\x01\x02" * 50000)
        assert socket.recv() == b"\x02\x01\x00" * 50000
    finally:
        socket.close()
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(url, timeout=30)
    assert refused.value.status_code == 401
    assert (refused.value.resp_headers or {}).get("connection") == "close"


def test_a_paused_sandbox_is_resumed_by_a_request(servers: Servers) -> None:
    client = servers.service.client
    pause = client.post(
        f"/v1/conversations/{servers.conversation}/sandbox/pause",
        headers=sandbox_headers(),
        json={},
    )
    assert pause.status_code == 200, pause.text
    state = client.get(f"/v1/conversations/{servers.conversation}/sandbox", headers=headers())
    assert state.json()["state"] == "paused", state.text
    response = client.get(servers.url(FILE_SERVER, "app.py"), headers=servers.token)
    assert response.status_code == 200 and "ThreadingHTTPServer" in response.text
    state = client.get(f"/v1/conversations/{servers.conversation}/sandbox", headers=headers())
    assert state.json()["state"] == "running", json.dumps(state.json())


def ws_url(servers: Servers, tail: str) -> str:
    return servers.service.base_url.replace("http", "ws") + servers.url(ECHO_SERVER, tail)


def test_the_query_reaches_the_server_as_sent_less_the_token(servers: Servers) -> None:
    token = servers.token["X-Siesta-Port-Token"]
    url = ws_url(servers, f"chat?flag&q=a%20b+c&token={token}&empty=&x=%2F")
    socket = websocket.create_connection(url, timeout=30)
    try:
        assert socket.recv() == "path /chat?flag&q=a%20b+c&empty=&x=%2F"
    finally:
        socket.close()


def test_a_websocket_the_client_keeps_talking_on_outlives_the_idle_limit(
    servers: Servers,
) -> None:
    socket = websocket.create_connection(ws_url(servers, "quiet"), header=servers.token, timeout=30)
    try:
        assert socket.recv() == "path /quiet"
        # The server stays quiet past the idle limit; what the client sends keeps it open.
        messages = IDLE_SECONDS + 2
        for _ in range(messages):
            socket.send("still here")
            time.sleep(1)
        socket.send("how many?")
        assert socket.recv() == f"echo: {messages}"
    finally:
        socket.close()


def test_large_messages_arrive_whole_while_the_server_pings(servers: Servers) -> None:
    # Each message goes to the server in several stdin frames; the Pongs the service
    # answers meanwhile must come between messages, never inside one.
    socket = websocket.create_connection(ws_url(servers, "pings"), header=servers.token, timeout=30)
    try:
        assert socket.recv() == "path /pings"
        for index in range(8):
            message = bytes([index]) * 300_000 + b"end"
            socket.send_binary(message)
            assert socket.recv() == message[::-1]
    finally:
        socket.close()


def test_a_port_answers_while_a_long_command_holds_the_conversation(servers: Servers) -> None:
    client = servers.service.client
    marker = servers.url(FILE_SERVER, "long-command.started")
    command = {"command": "touch long-command.started && sleep 8 && rm long-command.started"}
    running = threading.Thread(
        target=call, args=(servers.service, servers.conversation, "runCommand", command)
    )
    running.start()
    try:

        def started() -> bool:
            response = client.get(marker, headers=servers.token)
            assert response.status_code in (200, 404), response.text  # never 409 session_busy
            return response.status_code == 200

        until(started)
        # Opened once the command surely held the lease (the first may have been before).
        again = client.get(marker, headers=servers.token)
        assert again.status_code == 200, again.text
        assert running.is_alive()  # the command still holds the lease
    finally:
        running.join()


def test_traffic_never_replaces_a_lost_sandbox(servers: Servers, docker_client: Any) -> None:
    service, conversation = servers.service, new_conversation()
    call(service, conversation, "runCommand", {"command": "true"})
    state = f"/v1/conversations/{conversation}/sandbox"
    session = service.client.get(state, headers=headers()).json()["sessionId"]
    access = f"/v1/conversations/{conversation}/sandbox/ports/{FILE_SERVER}"
    token = service.client.get(access, headers=sandbox_headers()).json()["token"]
    docker_client.containers.get(f"siesta-{session}").remove(force=True)
    docker_client.volumes.get(f"siesta-{session}").remove(force=True)
    summary = run_reconcile(service, **QUIET_TIERS)
    assert summary["actions"]["sessions_marked_lost"]["ids"] == [session]

    page = service.client.get(
        f"/v1/conversations/{conversation}/ports/{FILE_SERVER}/",
        headers={"X-Siesta-Port-Token": token},
    )
    assert page.status_code == 404, page.text
    assert page.json()["error"]["code"] == "port_sandbox_not_found"
    asked = service.client.get(access, headers=sandbox_headers())
    assert asked.status_code == 404 and "lost" in asked.json()["error"]["message"]
    after = service.client.get(state, headers=headers()).json()
    assert (after["status"], after["sessionId"]) == ("lost", session)
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation}) == ([], [])


QUIET_TIERS = {
    "SIESTA_LIFECYCLE__PAUSE_AFTER_SECONDS": "100000",
    "SIESTA_LIFECYCLE__STOP_AFTER_SECONDS": "200000",
    "SIESTA_LIFECYCLE__RETIRE_AFTER_SECONDS": "300000",
    "SIESTA_RECONCILE__ORPHAN_GRACE_SECONDS": "100000",
}
"""A reconcile pass that only notes what vanished: nothing here is idle or orphaned long."""
