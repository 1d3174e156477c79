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


def test_several_forks_in_one_call_each_start_or_say_why_not(
    start_service: StartService,
) -> None:
    service = start_service("fake", SIESTA_SNAPSHOTS__MAX_FORKS_PER_CALL="3")
    client = service.client
    source, taken_id = new_conversation(), new_conversation()
    run_command(client, source, "echo kept > file")
    run_command(client, taken_id, "echo mine > file")
    url = f"/v1/conversations/{source}/forks"

    fresh = [new_conversation(), new_conversation()]
    answer = client.post(
        url, json={"conversationIds": [fresh[0], taken_id, fresh[1]]}, headers=headers()
    )
    assert answer.status_code == 201, answer.text
    made = answer.json()
    assert made["sourceConversationId"] == source
    outcomes = {fork["conversationId"]: fork for fork in made["forks"]}
    assert [fork["conversationId"] for fork in made["forks"]] == [fresh[0], taken_id, fresh[1]]
    assert outcomes[taken_id]["started"] is None
    assert outcomes[taken_id]["error"]["code"] == "conversation_exists"
    for conversation in fresh:
        assert outcomes[conversation]["error"] is None
        assert outcomes[conversation]["started"]["conversationId"] == conversation
        assert run_command(client, conversation, "cat file")["stdout"] == "kept\n"
    # The conversation that had a sandbox kept its own files.
    assert run_command(client, taken_id, "cat file")["stdout"] == "mine\n"
    # A fork keeps no snapshot.
    assert client.get("/v1/snapshots", headers=headers()).json() == {"snapshots": []}

    # The document states this deployment's limit, and the service answers by it.
    document = client.get("/openapi.json").json()
    ids = document["components"]["schemas"]["ForksCreate"]["properties"]["conversationIds"]
    assert ids["maxItems"] == 3
    too_many = [new_conversation() for _ in range(4)]
    refused = error(client.post(url, json={"conversationIds": too_many}, headers=headers()), 422)
    assert (refused["code"], refused["limit"], refused["unit"]) == ("invalid_request", 3, "forks")
    assert "SIESTA_SNAPSHOTS__MAX_FORKS_PER_CALL" in refused["message"]
    again = new_conversation()
    twice = client.post(url, json={"conversationIds": [again, again]}, headers=headers())
    assert error(twice, 422)["code"] == "invalid_request"
    bodies: list[dict[str, Any]] = [{}, {"conversationIds": []}, {"conversationIds": ["a/b"]}]
    for body in bodies:
        assert client.post(url, json=body, headers=headers()).status_code == 422
    # Nothing refused made a sandbox.
    for conversation in (*too_many, again):
        described = client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers())
        assert described.status_code == 404, described.text


def test_keeping_memory_is_refused_with_the_reason_and_makes_nothing(
    service: ServiceProcess,
) -> None:
    client = service.client
    source = new_conversation()
    run_command(client, source, "echo kept > file", org="org-memory")
    fork_to = new_conversation()
    asks = [
        (f"/v1/conversations/{source}/snapshots", {"keepMemory": True}),
        (f"/v1/conversations/{source}/fork", {"conversationId": fork_to, "keepMemory": True}),
        (f"/v1/conversations/{source}/forks", {"conversationIds": [fork_to], "keepMemory": True}),
    ]
    for url, body in asks:
        refused = error(client.post(url, json=body, headers=headers(org="org-memory")), 422)
        assert refused["code"] == "snapshot_memory_not_supported"
        assert refused["reason"] in refused["message"]
        assert "no memory to keep" in refused["reason"]
    assert client.get("/v1/snapshots", headers=headers(org="org-memory")).json() == {
        "snapshots": []
    }
    described = client.get(
        f"/v1/conversations/{fork_to}/sandbox", headers=headers(org="org-memory")
    )
    assert described.status_code == 404, described.text
    # Files alone, as ever.
    assert snapshot(client, source, org="org-memory").status_code == 201
