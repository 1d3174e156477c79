"""Previews' host form on Docker: ``PORT-LABEL.PREVIEW_DOMAIN``, an origin per
conversation and port. The label is unguessable and the org's and conversation's own;
the preview token comes once as ``?token=`` and is then a cookie of that host only;
the server's answer (its cookies too) passes as it came; no other name under the
preview domain reaches the API or the console. (``*.localhost`` names: the requests go
to the service's address with the name as ``Host``.)"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import websocket

from tests.api.test_ports_docker import (
    APP_SERVER,
    ECHO,
    ECHO_SERVER,
    FILE_SERVER,
    call,
    sandbox_headers,
    until,
)
from tests.helpers import ServiceProcess, StartService, new_conversation

pytestmark = [pytest.mark.docker]

DOMAIN = "previews.localhost"
PREVIEW_HOST = re.compile(rf"^http://(\d+)-([a-z2-7]{{24}})\.{re.escape(DOMAIN)}:\d+$")
APP = f"""
import http.server
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Set-Cookie", "app=1; Path=/")
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<script>document.title = 'ran'</script>")
http.server.ThreadingHTTPServer(("127.0.0.1", {APP_SERVER}), Handler).serve_forever()
"""


@pytest.fixture(scope="module")
def service(start_service: StartService, docker_client: object) -> ServiceProcess:
    return start_service("docker", SIESTA_PORTS__PREVIEW_DOMAIN=DOMAIN)


@pytest.fixture(scope="module")
def conversation(service: ServiceProcess) -> str:
    conversation = new_conversation()
    call(service, conversation, "writeFile", {"path": "app.py", "content": APP})
    call(service, conversation, "processes", {"command": "python3 app.py"})
    command = f"python3 -m http.server {FILE_SERVER} --bind 127.0.0.1"
    call(service, conversation, "processes", {"command": command})
    call(service, conversation, "writeFile", {"path": "echo.py", "content": ECHO})
    call(service, conversation, "processes", {"command": "python3 echo.py"})
    return conversation


def access(service: ServiceProcess, conversation: str, port: int, org: str = "org-a") -> Any:
    response = service.client.get(
        f"/v1/conversations/{conversation}/sandbox/ports/{port}", headers=sandbox_headers(org)
    )
    assert response.status_code == 200, response.text
    return response.json()


def as_host(service: ServiceProcess, url: str) -> tuple[httpx.Client, str]:
    """A client of its own (a browser's cookie jar) that sends ``url``'s host name to
    the service's address; ``url``'s path and query."""
    parts = urlsplit(url)
    client = httpx.Client(base_url=service.base_url, headers={"Host": parts.netloc}, timeout=60)
    return client, parts.path + (f"?{parts.query}" if parts.query else "")


def test_a_preview_opens_on_its_own_host_and_keeps_its_token_in_that_hosts_cookie(
    service: ServiceProcess, conversation: str
) -> None:
    opened = access(service, conversation, APP_SERVER)
    found = PREVIEW_HOST.match(opened["previewUrl"].split("/?")[0])
    assert found and found.group(1) == str(APP_SERVER), opened["previewUrl"]
    client, target = as_host(service, opened["previewUrl"])
    with client:
        until(lambda: client.get(target).status_code != 502)
        moved = client.get(target)
        assert moved.status_code == 307 and moved.headers["location"] == "/"  # the token left
        cookie = moved.headers["set-cookie"]
        assert "HttpOnly" in cookie and "Path=/" in cookie and "Domain" not in cookie
        client.cookies.set("siesta_port_token", cookie.split(";")[0].split("=", 1)[1])
        # the redirect is the service's own answer: the sandbox's server may still be starting
        until(lambda: client.get("/").status_code != 502)
        page = client.get("/")
        # Its own origin: the page runs as served, its cookies are its host's.
        assert page.status_code == 200 and b"<script>" in page.content
        assert "content-security-policy" not in page.headers
        assert page.headers["set-cookie"] == "app=1; Path=/"
        client.cookies.clear()
        assert client.get("/").status_code == 401


def test_the_label_is_the_org_and_conversations_own(
    service: ServiceProcess, conversation: str
) -> None:
    mine = access(service, conversation, FILE_SERVER)
    label = urlsplit(mine["previewUrl"]).netloc.split(".")[0].split("-")[1]
    assert conversation.lower() not in label
    # The same conversation id in another org: another label, and its token opens nothing here.
    call_b = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": "true"},
        headers=sandbox_headers("org-b"),
    )
    assert call_b.status_code == 200, call_b.text
    theirs = access(service, conversation, FILE_SERVER, org="org-b")
    assert urlsplit(theirs["previewUrl"]).netloc != urlsplit(mine["previewUrl"]).netloc
    client, _ = as_host(service, mine["previewUrl"])
    their_token = theirs["previewUrl"].split("?token=")[1]
    with client:
        refused = client.get("/", headers={"X-Siesta-Port-Token": their_token})
        assert refused.status_code == 401
        # The path form's token is no preview token.
        refused = client.get("/", headers={"X-Siesta-Port-Token": mine["token"]})
        assert refused.status_code == 401
        right = client.get("/", headers={"X-Siesta-Port-Token": mine["previewUrl"].split("=")[1]})
        assert right.status_code == 200


@pytest.mark.parametrize(
    "host", [DOMAIN, f"www.{DOMAIN}", f"8000-{'a' * 24}x.{DOMAIN}", f"0-{'a' * 24}.{DOMAIN}"]
)
@pytest.mark.parametrize("path", ["/console", "/v1/images", "/healthz"])
def test_no_other_name_under_the_preview_domain_reaches_the_service(
    service: ServiceProcess, host: str, path: str
) -> None:
    answer = service.client.get(path, headers={"Host": host})
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "preview_host_unknown"


def test_a_conversation_without_a_sandbox_has_no_preview(service: ServiceProcess) -> None:
    answer = service.client.get(
        f"/v1/conversations/{new_conversation()}/sandbox/ports/8000", headers=sandbox_headers()
    )
    assert answer.status_code == 404


def test_a_websocket_opens_on_the_preview_host_with_its_cookie(
    service: ServiceProcess, conversation: str
) -> None:
    opened = access(service, conversation, ECHO_SERVER)
    host = urlsplit(opened["previewUrl"]).netloc
    token = opened["previewUrl"].split("?token=")[1]
    address = service.base_url.replace("http", "ws") + "/chat"
    until(lambda: access(service, conversation, ECHO_SERVER)["listening"])
    socket = websocket.create_connection(
        address, host=host, cookie=f"siesta_port_token={token}", timeout=30
    )
    try:
        assert socket.recv() == "path /chat"
        socket.send("hello")
        assert socket.recv() == "echo: hello"
    finally:
        socket.close()
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(address, host=host, timeout=30)
    assert refused.value.status_code == 401
