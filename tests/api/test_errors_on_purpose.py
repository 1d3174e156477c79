"""Errors a user can meet only when something goes wrong underneath, produced on
purpose: the exact code, status and what the answer says of the limit involved."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.records import conversation_key
from tests.helpers import TOKEN, new_conversation
from tests.inprocess import InProcessService, in_process_service

HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "X-Siesta-Org": "org-a",
    "X-Siesta-User": "user-1",
    "X-Siesta-Base-Image": "debian-base",
}
LEASE_TTL = 1.5


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_LEASE__TTL_SECONDS": str(LEASE_TTL)}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def test_an_operation_whose_lease_is_taken_over_answers_lease_expired(
    service: InProcessService, tmp_path: Path
) -> None:
    """As when this instance stalls past the lease TTL and another one takes the
    conversation: the stalled operation's result is discarded, never reported."""
    conversation = new_conversation()
    marker = tmp_path / "finished"
    answers: list[Any] = []
    command = f"sleep {LEASE_TTL * 3}; touch {marker}; echo finished"

    def run() -> None:
        answers.append(
            service.client.post(
                f"/v1/conversations/{conversation}/sandbox/runCommand",
                headers=HEADERS,
                json={"command": command},
            )
        )

    caller = threading.Thread(target=run)
    caller.start()
    stores = service.client.app.state.services.stores  # type: ignore[attr-defined]
    key = conversation_key("org-a", conversation)
    deadline = time.monotonic() + 10
    while stores.leases.lease_owner(key) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    owner = stores.leases.lease_owner(key)
    assert owner is not None, "the call never held the conversation's lease"
    # Another holder takes the conversation: the first one's next renewal fails.
    assert stores.leases.release_lease(key, owner)
    assert stores.leases.acquire_lease(key, "another-instance", 60) is not None
    caller.join(30)
    (answer,) = answers
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == "lease_expired"
    assert (error["limit"], error["unit"]) == (LEASE_TTL, "seconds")
    assert "finished" not in answer.text
    assert stores.leases.release_lease(key, "another-instance")


def test_a_sandbox_that_cannot_be_made_answers_provisioning_failed(
    service: InProcessService,
) -> None:
    """The fake provider fails to make a sandbox from a snapshot whose workspace copy
    is gone: the call says so with a stable code and a 5xx the caller may retry."""
    conversation = new_conversation()
    made = service.client.post(
        f"/v1/conversations/{conversation}/sandbox/writeFile",
        headers=HEADERS,
        json={"path": "a.txt", "content": "a"},
    )
    assert made.status_code == 200, made.text
    taken = service.client.post(
        f"/v1/conversations/{conversation}/snapshots", headers=HEADERS, json={}
    )
    assert taken.status_code == 201, taken.text
    snapshot_id = taken.json()["snapshotId"]
    # Its workspace copy is lost on the host (a disk failure, an operator's rm).
    provider = service.client.app.state.services.provider  # type: ignore[attr-defined]
    shutil.rmtree(provider.lifecycle.root / ".snapshots" / snapshot_id)  # the fake keeps it there
    started = service.client.post(
        f"/v1/snapshots/{snapshot_id}/conversations",
        headers=HEADERS,
        json={"conversationId": new_conversation()},
    )
    assert started.status_code == 503, started.text
    error = started.json()["error"]
    assert error["code"] == "provisioning_failed"
    assert f"the snapshot {snapshot_id} has no workspace copy any more" in error["message"]
