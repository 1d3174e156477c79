"""A conversation's sandbox file system through /v1 on Docker: stat, list with depth,
make folders, move, remove and watch, as the sandbox's users, and a terminal over
a WebSocket (keys in, screen out, resize, detach and attach again, hang-up)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websocket

from siesta_client import AsyncSiestaClient, SiestaClient
from siesta_client.errors import SiestaError
from tests.helpers import TOKEN, ServiceProcess, headers, new_conversation, run_command
from tests.terminals import next_message, screen_until

pytestmark = [pytest.mark.docker]


def fs(service: ServiceProcess, conversation: str, call: str, **body: Any) -> httpx.Response:
    return service.client.post(
        f"/v1/conversations/{conversation}/sandbox/fs/{call}", json=body, headers=headers()
    )


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_stat_list_make_move_remove_anywhere_as_the_sandboxs_users(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    made = ok(fs(docker_service, conversation, "mkdir", path="a/b"), 201)
    assert (made["path"], made["type"], made["owner"]) == ("/mnt/work/a/b", "directory", "root")
    assert code(fs(docker_service, conversation, "mkdir", path="a/b")) == (409, "already_exists")
    run_command(docker_service.client, conversation, "printf hi > a/b/f.txt && ln -s b a/link")

    stat = ok(fs(docker_service, conversation, "stat", path="/mnt/work/a/b/f.txt"))
    assert (stat["name"], stat["type"], stat["size"], stat["permissions"]) == (
        "f.txt",
        "file",
        2,
        "-rw-r--r--",
    )
    link = ok(fs(docker_service, conversation, "stat", path="a/link"))
    # Where it points, absolute (as envd shows it), though the link itself says "b".
    assert (link["type"], link["symlinkTarget"]) == ("directory", "/mnt/work/a/b")

    listed = ok(fs(docker_service, conversation, "list", path="a", depth=2))["entries"]
    assert [e["path"] for e in listed] == [
        "/mnt/work/a/b",
        "/mnt/work/a/b/f.txt",
        "/mnt/work/a/link",
    ]
    only_top = ok(fs(docker_service, conversation, "list", path="a"))["entries"]
    assert [e["name"] for e in only_top] == ["b", "link"]
    assert code(fs(docker_service, conversation, "list", path="a/b/f.txt")) == (
        404,
        "not_a_directory",
    )

    moved = ok(fs(docker_service, conversation, "move", source="a/b/f.txt", destination="/tmp/x/g"))
    assert (moved["path"], moved["size"]) == ("/tmp/x/g", 2)
    in_place = ok(
        fs(docker_service, conversation, "move", source="/tmp/x/g", destination="/tmp/x/g")
    )
    assert in_place["path"] == "/tmp/x/g"  # a move onto itself changes nothing
    mount = fs(docker_service, conversation, "remove", path="/mnt/work")
    assert code(mount) == (409, "file_operation_failed")  # what the sandbox refuses
    assert code(fs(docker_service, conversation, "stat", path="a/b/f.txt")) == (
        404,
        "file_not_found",
    )
    assert fs(docker_service, conversation, "remove", path="/tmp/x").status_code == 204
    assert code(fs(docker_service, conversation, "stat", path="/tmp/x/g")) == (
        404,
        "file_not_found",
    )

    # The sandbox's own permissions decide: nobody may not write into /root.
    refused = fs(docker_service, conversation, "mkdir", path="/root/x", user="nobody")
    assert code(refused) == (403, "permission_denied")
    unknown = fs(docker_service, conversation, "stat", path="a", user="no_such_user")
    assert code(unknown) == (404, "unknown_user")


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: ") :])


def changes_until(
    events: Iterator[tuple[str, dict[str, Any]]], last: tuple[str, str]
) -> set[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    for name, data in events:
        assert name == "change", (name, data)
        seen.add((data["type"], data["name"]))
        if last in seen:
            return seen
    msg = f"the stream ended before {last}: {seen}"
    raise AssertionError(msg)


def watchers_running(service: ServiceProcess, conversation: str) -> int:
    found = run_command(service.client, conversation, "pgrep -c -f 'siesta-f[s] watch' || true")
    return int(found["stdout"].strip() or 0)


def test_a_watcher_keeps_changes_for_polls_and_streams_until_deleted(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "mkdir -p watched")
    watcher = ok(fs(docker_service, conversation, "watchers", path="watched", recursive=True), 201)
    url = f"/v1/conversations/{conversation}/sandbox/fs/watchers/{watcher['id']}"
    assert watchers_running(docker_service, conversation) == 1
    run_command(docker_service.client, conversation, "mkdir watched/sub && echo x > watched/sub/f")

    # Polled, with a wait: folders made later are watched too (what was made in them
    # before the watch reached them is reported as made).
    seen: set[tuple[str, str]] = set()
    deadline = time.monotonic() + 15
    while ("create", "sub/f") not in seen:
        assert time.monotonic() < deadline, seen
        polled = ok(docker_service.client.get(url, params={"waitSeconds": 5}, headers=headers()))
        seen |= {(c["type"], c["name"]) for c in polled["changes"]}
    assert ("create", "sub") in seen

    # A folder moved in whole: its contents were made before any watch could see them.
    run_command(docker_service.client, conversation, "mkdir -p pre/in && echo x > pre/in/f")
    run_command(docker_service.client, conversation, "mv pre watched/moved")
    deadline = time.monotonic() + 15
    while ("create", "moved/in/f") not in seen:
        assert time.monotonic() < deadline, seen
        polled = ok(docker_service.client.get(url, params={"waitSeconds": 5}, headers=headers()))
        seen |= {(c["type"], c["name"]) for c in polled["changes"]}
    assert {("create", "moved"), ("create", "moved/in")} <= seen

    # Streamed: the same watcher's changes from now on.
    sse = {**headers(), "Accept": "text/event-stream"}
    with docker_service.client.stream("GET", url, headers=sse, timeout=20) as stream:
        assert stream.status_code == 200
        run_command(docker_service.client, conversation, "echo y >> watched/sub/f")
        assert ("write", "sub/f") in changes_until(
            sse_events(stream.iter_lines()), ("write", "sub/f")
        )

    other = docker_service.client.get(
        url.replace(conversation, new_conversation()), headers=headers()
    )
    assert other.status_code == 404  # a watcher is its conversation's
    assert docker_service.client.delete(url, headers=headers()).status_code == 204
    deadline = time.monotonic() + 15
    while watchers_running(docker_service, conversation):
        assert time.monotonic() < deadline, "the watch outlived its watcher"
        time.sleep(0.2)
    assert code(docker_service.client.get(url, headers=headers())) == (404, "not_found")
    missing = fs(docker_service, conversation, "watchers", path="nowhere")
    assert code(missing) == (404, "file_not_found")


UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}
"""A WebSocket handshake's request headers."""


def ws_base(service: ServiceProcess) -> str:
    return "ws" + service.base_url.removeprefix("http")


def open_terminal(service: ServiceProcess, conversation: str, query: str) -> websocket.WebSocket:
    url = f"{ws_base(service)}/v1/conversations/{conversation}/sandbox/terminal"
    header = [f"{name}: {value}" for name, value in headers().items()]
    return websocket.create_connection(f"{url}?{query}", header=header, timeout=30)


def process_state(service: ServiceProcess, conversation: str, pid: int) -> dict[str, Any]:
    url = f"/v1/conversations/{conversation}/sandbox/processes/{pid}"
    found: dict[str, Any] = ok(service.client.get(url, headers=headers()))
    return found


def test_a_terminal_types_resizes_detaches_attaches_and_exits(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    terminal = open_terminal(docker_service, conversation, "cols=90&rows=20")
    started = json.loads(terminal.recv())
    assert started["type"] == "started"
    pid = started["pid"]
    terminal.send_binary(b"stty size; echo $((6*7))-$PWD-$TERM\n")
    assert "20 90" in screen_until(terminal, "42-/mnt/work-xterm-256color")
    terminal.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
    terminal.send(json.dumps({"type": "input", "data": "stty size\n"}))
    screen_until(terminal, "40 120")
    terminal.send("not json")
    assert next_message(terminal)["code"] == "invalid_frame"
    terminal.send(json.dumps({"type": "detach"}))
    terminal.close()

    time.sleep(1)
    assert process_state(docker_service, conversation, pid)["running"] is True
    again = open_terminal(docker_service, conversation, f"pid={pid}")
    assert json.loads(again.recv()) == {"type": "started", "pid": pid}
    assert "40 120" in screen_until(again, "40 120")  # the last screenful, shown again
    again.send_binary(b"exit 3\n")
    ended = next_message(again)
    assert (ended["type"], ended["exitCode"]) == ("exit", 3)
    again.close()
    assert process_state(docker_service, conversation, pid)["status"] == "exit status 3"


def test_closing_a_terminal_hangs_it_up_and_a_refused_one_says_why(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    terminal = open_terminal(docker_service, conversation, "")
    pid = json.loads(terminal.recv())["pid"]
    terminal.close()
    deadline = time.monotonic() + 15
    while process_state(docker_service, conversation, pid)["running"]:
        assert time.monotonic() < deadline, "a closed terminal kept running"
        time.sleep(0.2)

    # A refused handshake is a plain HTTP answer that says the server closes the
    # connection, so a client's next request takes a new one rather than a socket
    # about to be reset (websocket-client would leave a refused socket open).
    url = f"/v1/conversations/{conversation}/sandbox/terminal"
    with httpx.Client(base_url=docker_service.base_url, timeout=30) as handshake:
        refused = handshake.get(url, headers={**UPGRADE, "Authorization": "Bearer x"})
        assert code(refused) == (401, "unauthorized")
        assert refused.headers["connection"] == "close"
        assert refused.headers["www-authenticate"] == "Bearer"
        not_one = handshake.get(url, params={"pid": 999999}, headers={**UPGRADE, **headers()})
        assert code(not_one) == (404, "process_not_found")
        assert not_one.headers["connection"] == "close"


def test_the_python_clients_reach_the_file_system(docker_service: ServiceProcess) -> None:
    with SiestaClient(docker_service.base_url, TOKEN) as siesta:
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        assert conv.make_dir("app/src").path == "/mnt/work/app/src"
        moved = conv.move("app/src", "app/lib")
        assert [e.path for e in conv.list_dir("app", depth=2).entries] == [moved.path]
        conv.remove("app")
        with pytest.raises(SiestaError) as missing:
            conv.stat("app")
        assert missing.value.code == "file_not_found"

    async def from_async_client() -> None:
        async with AsyncSiestaClient(docker_service.base_url, TOKEN) as client:
            conv = client.conversation(
                new_conversation(), org="org-a", user="user-1", base_image="debian-base"
            )
            home = await conv.stat("/root")
            assert (home.type, home.owner) == ("directory", "root")

    asyncio.run(from_async_client())
