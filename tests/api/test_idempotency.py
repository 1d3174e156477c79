"""Safe retries with ``Idempotency-Key``, on real service processes (fake provider).

Every mutating route replays its first answer to a retry with the same key; a
command retried runs once (it appends a line to a file: one line); another
request with the key is refused; a retry while the first runs waits for it; keys
expire; and two instances sharing one Redis replay each other's answers.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.helpers import ServiceProcess, StartService, headers, new_conversation, run_command
from tests.redis_server import RedisServer

SELF_APPROVING = {
    "SIESTA_TOOLS__FUNCTION_POLICIES": "{}",  # publishing asks first (the default)
    "SIESTA_TOOLS__ALLOW_SELF_APPROVAL": "true",
}
AGENT = {"id": "agent-1", "systemToolIds": ["sandbox"], "baseImage": "debian-base"}
USER = {"id": "user-1", "role": "User"}
APPEND = "echo ran >> runs.txt; wc -l < runs.txt"


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("fake", **SELF_APPROVING)


def key() -> str:
    return f"retry-{uuid.uuid4().hex}"


@dataclass
class Call:
    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    content_type: str | None = None

    def send(
        self, service: ServiceProcess, idempotency_key: str | None, **extra: str
    ) -> httpx.Response:
        sent = {**headers(), **extra}
        if idempotency_key is not None:
            sent["Idempotency-Key"] = idempotency_key
        if self.content_type:
            sent["Content-Type"] = self.content_type
        return service.client.request(
            self.method, self.path, json=self.json, content=self.content, headers=sent
        )


def upload_body(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "fixed-boundary-for-retries"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: text/plain\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def pending_approval(service: ServiceProcess, conversation: str) -> str:
    run_command(service.client, conversation, "echo data > out.txt")
    held = Call("POST", f"/v1/conversations/{conversation}/sandbox/publishFiles")
    held.json = {"paths": ["out.txt"]}
    response = held.send(service, None)
    assert response.status_code == 202, response.text
    approval: str = response.json()["error"]["approvalId"]
    return approval


def routes(service: ServiceProcess) -> list[tuple[str, Call, int]]:
    """Every mutating route with a call that works, and its status."""
    conversation = new_conversation()
    base = f"/v1/conversations/{conversation}"
    run_command(service.client, conversation, "echo text > w.txt")
    upload, upload_type = upload_body("notes.txt", b"hello")
    approval = pending_approval(service, new_conversation())
    bank = {"name": "facts", "type": "general"}
    made = service.client.post("/v1/memory-banks", headers=headers(), json=bank)
    entries = f"/v1/memory-banks/{made.json()['memoryBankId']}/entries"
    execute = {
        "conversationId": conversation,
        "agent": AGENT,
        "user": USER,
        "function": "listFiles",
        "arguments": {"path": "."},
    }
    return [
        ("runCommand", Call("POST", f"{base}/sandbox/runCommand", {"command": APPEND}), 200),
        (
            "writeFile",
            Call("POST", f"{base}/sandbox/writeFile", {"path": "a", "content": "x"}),
            200,
        ),
        ("readFile", Call("POST", f"{base}/sandbox/readFile", {"path": "w.txt"}), 200),
        ("listFiles", Call("POST", f"{base}/sandbox/listFiles", {"path": "."}), 200),
        ("publishFiles", Call("POST", f"{base}/sandbox/publishFiles", {"paths": ["w.txt"]}), 202),
        ("js", Call("POST", f"{base}/js", {"code": "1 + 1"}), 200),
        ("upload", Call("POST", f"{base}/files", content=upload, content_type=upload_type), 201),
        ("execute", Call("POST", "/v1/tools/execute", execute), 200),
        (
            "catalog",
            Call("POST", "/v1/tools/catalog", {"agent": AGENT, "user": USER, "org": "org-a"}),
            200,
        ),
        (
            "approve",
            Call("POST", f"/v1/tools/approvals/{approval}", {"decision": "approve", "by": "u1"}),
            200,
        ),
        ("validate", Call("POST", "/v1/images/validate", {"baseImage": "debian-base"}), 200),
        ("reconcile", Call("POST", "/v1/admin/reconcile?dryRun=true"), 200),
        ("memory bank", Call("POST", "/v1/memory-banks", bank), 201),
        ("memory entry", Call("POST", entries, {"key": "k", "content": "once"}), 201),
        ("delete", Call("DELETE", base), 200),
    ]


def test_every_mutating_route_replays_its_first_answer(service: ServiceProcess) -> None:
    for name, call, status in routes(service):
        used = key()
        first = call.send(service, used)
        assert first.status_code == status, (name, first.text)
        assert "idempotent-replayed" not in first.headers
        again = call.send(service, used)
        assert again.status_code == status, (name, again.text)
        assert again.headers["idempotent-replayed"] == "true", name
        assert again.headers["content-type"] == first.headers["content-type"], name
        assert again.content == first.content, name


def test_a_retried_command_runs_once(service: ServiceProcess) -> None:
    conversation = new_conversation()
    call = Call("POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": APPEND})
    used = key()
    answers = [call.send(service, used).json() for _ in range(3)]
    assert [a["stdout"] for a in answers] == ["1\n"] * 3
    assert run_command(service.client, conversation, "cat runs.txt")["stdout"] == "ran\n"
    assert call.send(service, key()).json()["stdout"] == "2\n"  # a new key runs again


def test_the_same_key_with_another_request_is_refused(service: ServiceProcess) -> None:
    conversation = new_conversation()
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    used = key()
    assert Call("POST", path, {"command": APPEND}).send(service, used).status_code == 200
    for other in (
        Call("POST", path, {"command": "echo other"}),  # another body
        Call("POST", path.replace("runCommand", "listFiles"), {"command": APPEND}),  # path
    ):
        refused = other.send(service, used)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "idempotency_key_reused"
    another_user = Call("POST", path, {"command": APPEND}).send(
        service, used, **{"X-Siesta-User": "user-2"}
    )
    assert another_user.json()["error"]["code"] == "idempotency_key_reused"
    # Another agent narrowing: its checks must run (an invalid entry must not replay a 200).
    narrowed = Call("POST", path, {"command": APPEND}).send(
        service, used, **{"X-Siesta-Egress-Allow": "not a host!"}
    )
    assert narrowed.status_code != 200 and "idempotent-replayed" not in narrowed.headers
    assert run_command(service.client, conversation, "cat runs.txt")["stdout"] == "ran\n"


def test_keys_are_scoped_by_org(service: ServiceProcess) -> None:
    conversation = new_conversation()
    call = Call("POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": APPEND})
    used = key()
    assert call.send(service, used).json()["stdout"] == "1\n"
    elsewhere = call.send(service, used, **{"X-Siesta-Org": "org-b"})
    assert elsewhere.status_code == 200 and "idempotent-replayed" not in elsewhere.headers


@pytest.mark.parametrize("bad", [b"", b"x" * 256, b"with space", "naïve".encode()])
def test_a_malformed_key_is_refused(service: ServiceProcess, bad: bytes) -> None:
    call = Call("POST", "/v1/images/validate", {"baseImage": "debian-base"})
    sent = [(k.encode(), v.encode()) for k, v in headers().items()] + [(b"Idempotency-Key", bad)]
    response = service.client.post(call.path, json=call.json, headers=sent)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_idempotency_key" and error["limit"] == 255


def test_a_retry_while_the_first_runs_waits_for_its_answer(service: ServiceProcess) -> None:
    conversation = new_conversation()
    command = "echo ran >> runs.txt; sleep 2; wc -l < runs.txt"
    call = Call(
        "POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": command}
    )
    used = key()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(call.send, service, used)
        time.sleep(0.5)
        retry = pool.submit(call.send, service, used)
        answers = [first.result(), retry.result()]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].content == answers[1].content
    assert answers[1].headers["idempotent-replayed"] == "true"
    assert run_command(service.client, conversation, "cat runs.txt")["stdout"] == "ran\n"


def test_a_retry_waits_only_as_long_as_the_setting(start_service: StartService) -> None:
    impatient = start_service("fake", SIESTA_IDEMPOTENCY__WAIT_SECONDS="0.5")
    impatient.wait_contract_built()
    conversation = new_conversation()
    call = Call(
        "POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": "sleep 2"}
    )
    used = key()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(call.send, impatient, used)
        time.sleep(0.3)
        busy = call.send(impatient, used)
        assert first.result().status_code == 200
    assert busy.status_code == 409, busy.text
    error = busy.json()["error"]
    assert (error["code"], error["limit"], error["unit"]) == ("session_busy", 0.5, "seconds")


def test_a_key_past_its_ttl_runs_again(start_service: StartService) -> None:
    forgetful = start_service("fake", SIESTA_IDEMPOTENCY__TTL_SECONDS="1")
    conversation = new_conversation()
    call = Call("POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": APPEND})
    used = key()
    assert call.send(forgetful, used).json()["stdout"] == "1\n"
    assert call.send(forgetful, used).json()["stdout"] == "1\n"
    time.sleep(1.2)
    assert call.send(forgetful, used).json()["stdout"] == "2\n"


def test_an_answer_over_the_size_kept_is_not_run_again(start_service: StartService) -> None:
    small = start_service("fake", SIESTA_IDEMPOTENCY__MAX_RESPONSE_BYTES="1024")
    conversation = new_conversation()
    command = "echo ran >> runs.txt; head -c 4000 /dev/zero | tr '\\0' x"
    call = Call(
        "POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": command}
    )
    used = key()
    first = call.send(small, used)
    assert first.status_code == 200 and first.headers["idempotency-kept"] == "false"
    retry = call.send(small, used)
    assert retry.status_code == 409, retry.text
    error = retry.json()["error"]
    assert (error["code"], error["limit"]) == ("idempotency_result_not_kept", 1024)
    assert run_command(small.client, conversation, "cat runs.txt")["stdout"] == "ran\n"


def test_answers_that_say_try_again_are_not_kept(start_service: StartService) -> None:
    hurried = start_service("fake", SIESTA_LEASE__WAIT_SECONDS="0.2")
    hurried.wait_contract_built()
    conversation = new_conversation()
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    call = Call("POST", path, {"command": APPEND})
    used = key()
    # The sandbox made first, so the holder takes the lease at once; then a second of
    # margin before the blocked call (a loaded CI machine), which waits 0.2 s for it.
    assert Call("POST", path, {"command": "true"}).send(hurried, None).status_code == 200
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        holder = pool.submit(Call("POST", path, {"command": "sleep 3"}).send, hurried, None)
        time.sleep(1.0)
        blocked = call.send(hurried, used)
        assert holder.result().status_code == 200
    assert blocked.status_code == 409 and blocked.json()["error"]["code"] == "session_busy"
    retried = call.send(hurried, used)
    assert retried.status_code == 200 and "idempotent-replayed" not in retried.headers
    assert retried.json()["stdout"] == "1\n"


def test_a_streamed_call_keeps_its_result_event(service: ServiceProcess) -> None:
    conversation = new_conversation()
    path = f"/v1/conversations/{conversation}/sandbox/runCommand"
    used = key()
    sent = {**headers(), "Idempotency-Key": used, "Accept": "text/event-stream"}
    with service.client.stream("POST", path, json={"command": APPEND}, headers=sent) as stream:
        text = stream.read().decode()
    assert "event: result" in text
    replay = service.client.post(path, json={"command": APPEND}, headers=sent)
    assert replay.headers["content-type"] == "application/json"
    assert replay.json()["stdout"] == "1\n"
    assert run_command(service.client, conversation, "cat runs.txt")["stdout"] == "ran\n"


def test_mcp_and_unversioned_paths_are_left_alone(service: ServiceProcess) -> None:
    response = service.client.get("/healthz", headers={"Idempotency-Key": ""})
    assert response.status_code == 200


@pytest.mark.redis
def test_a_key_used_on_one_instance_is_replayed_by_another(
    start_service: StartService, redis_server: RedisServer
) -> None:
    redis_server.flush()
    a, b = (start_service("fake", SIESTA_STORE__URL=redis_server.url) for _ in range(2))
    conversation = new_conversation()
    call = Call("POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": APPEND})
    used = key()
    first = call.send(a, used)
    assert first.json()["stdout"] == "1\n"
    replay = call.send(b, used)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.content == first.content
    # Had B run it, its fake provider (which cannot see A's sandbox) would have replaced
    # the conversation's sandbox, and A would find no runs.txt.
    assert run_command(a.client, conversation, "cat runs.txt")["stdout"] == "ran\n"


@pytest.mark.redis
def test_a_retry_on_another_instance_waits_for_the_first(
    start_service: StartService, redis_server: RedisServer
) -> None:
    a, b = (start_service("fake", SIESTA_STORE__URL=redis_server.url) for _ in range(2))
    conversation = new_conversation()
    command = "echo ran >> runs.txt; sleep 2; wc -l < runs.txt"
    call = Call(
        "POST", f"/v1/conversations/{conversation}/sandbox/runCommand", {"command": command}
    )
    used = key()
    send: Callable[[ServiceProcess], httpx.Response] = lambda s: call.send(s, used)  # noqa: E731
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(send, a)
        time.sleep(0.5)
        retry = pool.submit(send, b)
        answers = [first.result(), retry.result()]
    assert answers[0].json()["stdout"] == "1\n"
    assert answers[1].content == answers[0].content


def test_a_method_no_route_takes_is_answered_by_the_app(service: ServiceProcess) -> None:
    used = key()
    reconcile = "/v1/admin/reconcile?dryRun=true"
    assert Call("POST", reconcile).send(service, used).status_code == 200
    response = Call("PATCH", reconcile).send(service, used)
    assert response.status_code == 405, response.text
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_the_openapi_document_offers_the_header_on_every_mutating_route(
    service: ServiceProcess,
) -> None:
    paths = service.client.get("/openapi.json").json()["paths"]
    mutating = [
        (path, method, operation)
        for path, item in paths.items()
        for method, operation in item.items()
        if method in ("post", "put", "patch", "delete")
        and path.startswith("/v1/")
        and "/ports/" not in path  # a sandbox's port: the header is its server's
    ]
    assert len(mutating) >= 13
    for path, method, operation in mutating:
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "header"]
        assert "Idempotency-Key" in names, (method, path)
