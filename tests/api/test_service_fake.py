"""Service behaviour that does not depend on the provider, on the fast fake one."""

from __future__ import annotations

import concurrent.futures
import hashlib
import socket
import time

import httpx
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
    upload,
)

WORKER_THREADS = 4


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("fake", SIESTA_HTTP__WORKER_THREADS=str(WORKER_THREADS))


def test_commands_of_one_conversation_never_overlap(service: ServiceProcess) -> None:
    conversation = new_conversation()
    command = "echo start $(date +%s%N) >> log; sleep 0.2; echo end $(date +%s%N) >> log"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(lambda _: run_command(service.client, conversation, command), range(4))
        )
    log = run_command(service.client, conversation, "cat log")["stdout"].split("\n")
    events = [line.split() for line in log if line]
    assert all(result["exitCode"] == 0 for result in results)
    assert [kind for kind, _ in events] == ["start", "end"] * 4
    stamps = [int(stamp) for _, stamp in events]
    assert stamps == sorted(stamps)


def test_health_answers_while_every_worker_thread_runs_a_command(service: ServiceProcess) -> None:
    def long_command(_: int) -> dict[str, object]:
        with httpx.Client(base_url=service.base_url, timeout=30) as client:
            return run_command(client, new_conversation(), "sleep 2; echo done")

    with concurrent.futures.ThreadPoolExecutor(WORKER_THREADS + 1) as pool:
        running = [pool.submit(long_command, i) for i in range(WORKER_THREADS + 1)]
        time.sleep(0.5)  # let them occupy the threads
        health = httpx.get(f"{service.base_url}/healthz", timeout=1.0)
        assert not any(future.done() for future in running)
        results = [future.result() for future in running]
    assert health.status_code == 200
    assert [result["stdout"] for result in results] == ["done\n"] * (WORKER_THREADS + 1)


def test_sandbox_can_be_disabled(start_service: StartService) -> None:
    disabled = start_service("fake", SIESTA_SANDBOX__ENABLED="false")
    response = disabled.client.post(
        f"/v1/conversations/{new_conversation()}/sandbox/runCommand",
        json={"command": "true"},
        headers=headers(),
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "sandbox_disabled"


def test_uploads_and_downloads_are_streamed_not_held(service: ServiceProcess) -> None:
    conversation = new_conversation()
    data = bytes(range(256)) * (60 * 1024 * 1024 // 256)  # 60 MiB
    service.client.get("/healthz")
    peak_before = service.peak_rss_kb()

    uploaded = upload(service.client, conversation, "big.bin", data)
    with service.client.stream(
        "GET",
        f"/v1/conversations/{conversation}/files/{uploaded['id']}/content",
        headers=headers(),
    ) as response:
        digest = hashlib.sha256()
        for chunk in response.iter_bytes():
            digest.update(chunk)

    growth_mb = (service.peak_rss_kb() - peak_before) / 1024
    assert uploaded["size"] == len(data)
    assert digest.hexdigest() == uploaded["sha256"] == hashlib.sha256(data).hexdigest()
    assert growth_mb < 20, f"service memory grew by {growth_mb:.1f} MB for a 60 MiB file"


def test_a_kept_alive_connection_is_closed_only_after_the_idle_setting(
    start_service: StartService,
) -> None:
    """A client (or a load balancer) that reuses its connection after a pause gets an
    answer; the service closes a connection only after it sat idle as long as
    SIESTA_HTTP__IDLE_CONNECTION_SECONDS."""
    idle_limit = 2
    service = start_service("fake", SIESTA_HTTP__IDLE_CONNECTION_SECONDS=str(idle_limit))
    host, port = service.base_url.removeprefix("http://").split(":")
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        for pause in (0.0, idle_limit / 2):
            time.sleep(pause)
            conn.sendall(request)
            assert _response(conn).startswith(b"HTTP/1.1 200 ")
        time.sleep(idle_limit + 1.5)  # uvicorn's own default (5 s) would keep it open
        assert conn.recv(65536) == b"", "an idle connection was kept past the setting"


def _response(conn: socket.socket) -> bytes:
    """One whole response (head and its Content-Length body) read off a connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body
