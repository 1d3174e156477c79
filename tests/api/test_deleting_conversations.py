"""Deleting a conversation leaves nothing behind: its approvals are cancelled (deciding
one afterwards is 410 ``approval_cancelled`` and runs nothing, even when the approval
won the race against the deletion), and the store keeps nothing of it but the
revocation of its egress credentials — on SQLite and on Redis, by the DELETE route
and by reconciliation (deleted while busy).

The app in this process with the fake provider; the store is read directly to find
anything of the conversation left in it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
import redis

from siesta_contract.tools import ExecutionStatus

from runtime.seams.providers import CONVERSATION_LABEL
from runtime.seams.store_settings import RedisStoreSettings
from runtime.services import Services
from tests.helpers import (
    APPROVER_TOKEN,
    headers,
    new_conversation,
    tokens_setting,
)
from tests.inprocess import InProcessService, in_process_service

ORG = "org-a"
HEADERS = headers(ORG)
APPROVER = {**HEADERS, "Authorization": f"Bearer {APPROVER_TOKEN}"}
AGENT = {"id": "agent-1", "systemToolIds": ["sandbox"], "baseImage": "debian-base"}
USER = {"id": "user-1", "role": "User"}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOKENS": tokens_setting(("approver", APPROVER_TOKEN, ["approve"])),
        "SIESTA_TOOLS__FUNCTION_POLICIES": '{"publishFiles": "confirm"}',
        "SIESTA_LEASE__WAIT_SECONDS": "2",
        "SIESTA_RECONCILE__BACKGROUND": "false",
    }
    if request.param == "redis":
        env["SIESTA_STORE__URL"] = request.getfixturevalue("redis_server").url
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def services_of(service: InProcessService) -> Services:
    services: Services = service.client.app.state.services  # type: ignore[attr-defined]
    return services


def keyed() -> dict[str, str]:
    """The context headers and a fresh Idempotency-Key (its record goes with the
    conversation too)."""
    return {**HEADERS, "Idempotency-Key": uuid.uuid4().hex}


def post(service: InProcessService, conversation: str, function: str, body: Any) -> httpx2.Response:
    return service.client.post(
        f"/v1/conversations/{conversation}/sandbox/{function}", headers=keyed(), json=body
    )


def hold_publishing(service: InProcessService, conversation: str) -> str:
    """A ``publishFiles`` the deployment's policy holds; its approval id."""
    held = post(service, conversation, "publishFiles", {"paths": ["out.txt"]})
    assert held.status_code == 202, held.text
    approval: str = held.json()["error"]["approvalId"]
    return approval


def hold_through_execute(service: InProcessService, conversation: str) -> str:
    response = service.client.post(
        "/v1/tools/execute",
        headers=keyed(),
        json={
            "conversationId": conversation,
            "agent": AGENT,
            "user": USER,
            "function": "publishFiles",
            "arguments": {"paths": ["out.txt"]},
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["error"]["code"] == "approval_required"
    approval: str = response.json()["error"]["approvalId"]
    return approval


def decide(service: InProcessService, approval: str, decision: str = "approve") -> httpx2.Response:
    return service.client.post(
        f"/v1/tools/approvals/{approval}",
        headers=APPROVER,
        json={"decision": decision, "by": "admin-7"},
    )


def log_of(service: InProcessService, conversation: str) -> list[dict[str, Any]]:
    response = service.client.get(
        "/v1/tools/executions", headers=HEADERS, params={"conversationId": conversation}
    )
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["executions"]
    return entries


def used(service: InProcessService, conversation: str) -> set[str]:
    """A conversation with a sandbox, a staged file and a log; every id it has."""
    uploaded = service.client.post(
        f"/v1/conversations/{conversation}/files",
        files={"file": ("in.txt", b"staged input", "text/plain")},
        headers=keyed(),
    )
    assert uploaded.status_code == 201, uploaded.text
    command = {"command": "cat in/in.txt > out.txt", "files": ["in.txt"]}
    ran = post(service, conversation, "runCommand", command)
    assert ran.status_code == 200, ran.text
    assert ran.json()["stagedFiles"], ran.json()
    return ids_of(service, conversation)


def ids_of(service: InProcessService, conversation: str) -> set[str]:
    sandbox = service.client.get(f"/v1/conversations/{conversation}/sandbox", headers=HEADERS)
    assert sandbox.status_code == 200, sandbox.text
    files = service.client.get(f"/v1/conversations/{conversation}/files", headers=HEADERS)
    return {
        conversation,
        sandbox.json()["sessionId"],
        *(entry["id"] for entry in log_of(service, conversation)),
        *(file["id"] for file in files.json()["files"]),
    }


def assert_nothing_left(service: InProcessService, conversation: str, ids: set[str]) -> None:
    services = services_of(service)
    described = service.client.get(f"/v1/conversations/{conversation}/sandbox", headers=HEADERS)
    assert described.status_code == 404, described.text
    labels = [s.labels for s in services.provider.lifecycle.list_sandboxes()]
    labels += [w.labels for w in services.provider.lifecycle.list_workspaces()]
    assert conversation not in {label.get(CONVERSATION_LABEL) for label in labels}
    assert log_of(service, conversation) == []
    assert traces(services, ids) == []
    revoked, _ = services.stores.revocations.egress_revocations(None, 10_000)
    assert (ORG, conversation) in {(r.org, r.conversation) for r in revoked}


def traces(services: Services, ids: set[str]) -> list[str]:
    """Where the store still holds one of ``ids``, but for cancelled approvals (kept
    until their deadline: see docs/concepts/lifecycle.md), the revocation of the
    conversation's egress credentials (kept for their retention) and wake-ups that
    expire within seconds."""
    if isinstance(services.settings.store, RedisStoreSettings):
        return redis_traces(services.settings.store.url, ids)
    return sqlite_traces(services, ids)


def sqlite_traces(services: Services, ids: set[str]) -> list[str]:
    found = []
    with sqlite3.connect(services.settings.sqlite_path) as db:
        tables = [
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        for table in set(tables) - {"cancelled_approvals", "egress_revocations"}:
            for row in db.execute(f"SELECT * FROM {table}"):
                if any(i in repr(row) for i in ids):
                    found.append(f"{table}: {row}")
    return found


def kind_of(trace: str) -> str:
    """What a trace is of: a table (``staged: ...``) or a key (``siesta:staged:...``)."""
    head = trace.removeprefix("siesta:").split(":", 1)[0].split(" ", 1)[0]
    return {"tool_executions": "execution", "sessions": "session", "files": "file"}.get(head, head)


def redis_traces(url: str, ids: set[str]) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    readers: dict[str, Callable[[str], Any]] = {
        "string": client.get,
        "hash": client.hgetall,
        "set": client.smembers,
        "zset": lambda key: client.zrange(key, 0, -1),
        "list": lambda key: client.lrange(key, 0, -1),
        "stream": lambda key: client.xrange(key),
    }
    found = []
    try:
        for key in client.scan_iter(count=1000):
            if key.startswith("siesta:approval-cancelled:") or 0 < client.pttl(key) <= 5000:
                continue
            if key == "siesta:egress-revocations":
                continue
            content = f"{key} {readers[str(client.type(key))](key)!r}"
            if any(i in content for i in ids):
                found.append(content)
    finally:
        client.close()
    return found


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_deciding_after_the_deletion_answers_410_and_runs_nothing(
    service: InProcessService, decision: str
) -> None:
    conversation = new_conversation()
    ids = used(service, conversation)
    approvals = [
        hold_publishing(service, conversation),
        hold_through_execute(service, conversation),
    ]
    ids |= set(approvals)
    before = traces(services_of(service), ids)
    deleted = service.client.delete(f"/v1/conversations/{conversation}", headers=HEADERS)
    answers = [decide(service, approval, decision) for approval in approvals]

    kinds = {kind_of(t) for t in before}
    assert {"staged", "execution", "session", "file", "idempotency"} <= kinds, before
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True, deleted.text
    for answer in answers:
        assert answer.status_code == 410, answer.text
        assert answer.json()["error"]["code"] == "approval_cancelled"
        assert "deleted" in answer.json()["error"]["message"]
    assert_nothing_left(service, conversation, ids)
    now = time.time()
    assert all(services_of(service).stores.executions.cancelled(ORG, a, now) for a in approvals)


def test_an_approval_that_won_the_race_never_reaches_the_sandbox(
    service: InProcessService,
) -> None:
    conversation = new_conversation()
    ids = used(service, conversation)
    approval = hold_publishing(service, conversation)
    services = services_of(service)
    answer: list[httpx2.Response] = []
    approving = threading.Thread(target=lambda: answer.append(decide(service, approval)))

    with services.leases.hold(f"{ORG}/{conversation}") as lease:  # as a deletion holds it
        approving.start()
        wait_until(lambda: status_of(services, approval) is ExecutionStatus.RUNNING)
        # Approved before the deletion, waiting for the conversation: torn down now.
        services.teardown_conversation(f"{ORG}/{conversation}", lease)
    approving.join()

    assert answer[0].status_code == 410, answer[0].text
    assert answer[0].json()["error"]["code"] == "approval_cancelled"
    assert_nothing_left(service, conversation, ids | {approval})


def test_deleting_a_busy_conversation_cancels_its_approvals_at_once(
    service: InProcessService,
) -> None:
    conversation = new_conversation()
    ids = used(service, conversation)
    before = hold_publishing(service, conversation)
    services = services_of(service)

    with services.leases.hold(f"{ORG}/{conversation}"):  # an operation still running
        pending = service.client.delete(f"/v1/conversations/{conversation}", headers=HEADERS)
        decided = decide(service, before)
        log_while_busy = log_of(service, conversation)
    after = hold_publishing(service, conversation)  # asked for before reconciliation ran
    report = services.reconciler.run()
    decided_after = decide(service, after)

    assert pending.status_code == 202 and pending.json()["deleted"] == "pending", pending.text
    assert decided.status_code == 410, decided.text
    assert decided.json()["error"]["code"] == "approval_cancelled"
    assert log_while_busy == []
    assert report.actions["deleted_conversations_torn_down"] == [f"{ORG}/{conversation}"]
    assert decided_after.status_code == 410, decided_after.text
    assert decided_after.json()["error"]["code"] == "approval_cancelled"
    assert_nothing_left(service, conversation, ids | {before, after})


def status_of(services: Services, approval: str) -> ExecutionStatus | None:
    execution = services.stores.executions.get(ORG, approval)
    return execution.status if execution is not None else None


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
