"""Snapshot and fork routes on the fast fake provider: validation, the org's limit,
conflicts and org boundaries. What survives into a fork is tested on Docker
(``test_snapshots_docker.py``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import ServiceProcess, StartService, headers, new_conversation, run_command

LIMIT = 2


@pytest.fixture(scope="module")
def service(start_service: StartService) -> ServiceProcess:
    return start_service("fake", SIESTA_SNAPSHOTS__MAX_PER_ORG=str(LIMIT))


def snapshot(client: httpx.Client, conversation: str, org: str = "org-a") -> httpx.Response:
    url = f"/v1/conversations/{conversation}/snapshots"
    return client.post(url, json={"name": "n"}, headers=headers(org=org))


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    found: dict[str, Any] = response.json()["error"]
    return found


def test_a_snapshot_needs_a_sandbox_and_the_org_has_a_limit(service: ServiceProcess) -> None:
    client = service.client
    assert error(snapshot(client, new_conversation()), 404)["code"] == "no_sandbox"

    source = new_conversation()
    run_command(client, source, "echo kept > file", org="org-limit")
    taken = [snapshot(client, source, org="org-limit") for _ in range(LIMIT + 1)]
    assert [r.status_code for r in taken[:LIMIT]] == [201] * LIMIT, taken[0].text
    refused = error(taken[LIMIT], 409)
    assert (refused["code"], refused["limit"]) == ("snapshot_limit_reached", LIMIT)
    assert "SIESTA_SNAPSHOTS__MAX_PER_ORG" in refused["message"]

    # Deleting one makes room; a fork is never counted.
    first = taken[0].json()["snapshotId"]
    assert (
        client.delete(f"/v1/snapshots/{first}", headers=headers(org="org-limit")).status_code == 204
    )
    assert snapshot(client, source, org="org-limit").status_code == 201
    fork = client.post(
        f"/v1/conversations/{source}/fork",
        json={"conversationId": new_conversation()},
        headers=headers(org="org-limit"),
    )
    assert fork.status_code == 201, fork.text


def test_forks_and_starts_refuse_a_conversation_in_use_and_bad_ids(
    service: ServiceProcess,
) -> None:
    client = service.client
    source, taken_id = new_conversation(), new_conversation()
    run_command(client, source, "echo kept > file")
    run_command(client, taken_id, "true")
    made = snapshot(client, source).json()["snapshotId"]

    fork_url = f"/v1/conversations/{source}/fork"
    for conversation in (taken_id, source):
        refused = client.post(fork_url, json={"conversationId": conversation}, headers=headers())
        assert error(refused, 409)["code"] == "conversation_exists"
    start_url = f"/v1/snapshots/{made}/conversations"
    refused = client.post(start_url, json={"conversationId": taken_id}, headers=headers())
    assert error(refused, 409)["code"] == "conversation_exists"
    for body in ({}, {"conversationId": ""}, {"conversationId": "a/b"}):
        assert client.post(fork_url, json=body, headers=headers()).status_code == 422
    unknown = client.post(
        "/v1/snapshots/snapnone/conversations",
        json={"conversationId": new_conversation()},
        headers=headers(),
    )
    assert error(unknown, 404)["code"] == "snapshot_not_found"
    no_user = {k: v for k, v in headers().items() if k != "X-Siesta-User"}
    missing = client.post(start_url, json={"conversationId": new_conversation()}, headers=no_user)
    assert error(missing, 400)["code"] == "missing_context"

    started = new_conversation()
    answer = client.post(start_url, json={"conversationId": started}, headers=headers())
    assert answer.status_code == 201, answer.text
    assert run_command(client, started, "cat file")["stdout"] == "kept\n"


def test_another_org_can_neither_see_nor_use_nor_delete_a_snapshot(
    service: ServiceProcess,
) -> None:
    client = service.client
    source = new_conversation()
    run_command(client, source, "true")
    made = snapshot(client, source).json()["snapshotId"]
    other = headers(org="org-other")

    assert client.get("/v1/snapshots", headers=other).json() == {"snapshots": []}
    assert error(client.get(f"/v1/snapshots/{made}", headers=other), 404)["code"] == (
        "snapshot_not_found"
    )
    assert error(client.delete(f"/v1/snapshots/{made}", headers=other), 404)["code"] == (
        "snapshot_not_found"
    )
    start = client.post(
        f"/v1/snapshots/{made}/conversations",
        json={"conversationId": new_conversation()},
        headers=other,
    )
    assert error(start, 404)["code"] == "snapshot_not_found"
    # Another org's conversation of the same id is another conversation: nothing to fork.
    fork = client.post(
        f"/v1/conversations/{source}/fork",
        json={"conversationId": new_conversation()},
        headers=other,
    )
    assert error(fork, 404)["code"] == "no_sandbox"

    listed = client.get("/v1/snapshots", params={"conversationId": source}, headers=headers())
    assert [s["snapshotId"] for s in listed.json()["snapshots"]] == [made]
    assert client.get(f"/v1/snapshots/{made}", headers=headers()).json()["conversationId"] == source


def test_a_fork_is_a_session_of_its_own_that_counts_against_capacity(
    start_service: StartService,
) -> None:
    client = start_service("fake", SIESTA_CAPACITY__MAX_ACTIVE_PER_USER="1").client
    source, fork = new_conversation(), new_conversation()
    run_command(client, source, "echo kept > file")
    made = snapshot(client, source).json()["snapshotId"]
    forked = client.post(
        f"/v1/conversations/{source}/fork", json={"conversationId": fork}, headers=headers()
    )
    assert forked.status_code == 201, forked.text

    def status(conversation: str) -> str:
        url = f"/v1/conversations/{conversation}/sandbox"
        found: str = client.get(url, headers=headers()).json()["status"]
        return found

    # The user's one slot is the fork's: the idle source was stopped to make room.
    assert (status(fork), status(source)) == ("active", "stopped")
    assert run_command(client, source, "cat file")["stdout"] == "kept\n"
    assert (status(fork), status(source)) == ("stopped", "active")

    # The snapshot outlives its conversation.
    assert client.delete(f"/v1/conversations/{source}", headers=headers()).status_code == 200
    started = new_conversation()
    answer = client.post(
        f"/v1/snapshots/{made}/conversations", json={"conversationId": started}, headers=headers()
    )
    assert answer.status_code == 201, answer.text
    assert run_command(client, started, "cat file")["stdout"] == "kept\n"
