"""Exactly once per Idempotency-Key, even when the instance running the call dies.

Two real service processes on one Redis and the machine's Docker engine. The first
instance is killed (SIGKILL) while it runs a keyed call; the client's retry goes to
the second one, which takes the key over once its claim's hold lapses.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import httpx
import pytest

from tests.helpers import (
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    run_command,
    sandbox_of,
)
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]

HOLD = "1"
"""Seconds a dead instance's claim on a key holds it (the setting; 30 by default)."""


@pytest.fixture
def pair(start_service: StartService, redis_server: RedisServer) -> Iterator[list[ServiceProcess]]:
    """Two instances on one Redis; the first is the one that dies."""
    redis_server.flush()
    yield [
        start_service(
            "docker",
            SIESTA_STORE__URL=redis_server.url,
            SIESTA_IDEMPOTENCY__HOLD_SECONDS=HOLD,
            SIESTA_LEASE__TTL_SECONDS="2",
        )
        for _ in range(2)
    ]


def keyed(
    service: ServiceProcess, conversation: str, key: str, path: str, body: dict[str, Any]
) -> httpx.Response:
    return service.client.post(
        f"/v1/conversations/{conversation}/{path}",
        json=body,
        headers={**headers(), "Idempotency-Key": key},
    )


def dies_while_running(
    service: ServiceProcess,
    conversation: str,
    key: str,
    path: str,
    body: dict[str, Any],
    after: float,
) -> None:
    """Sends the call, and kills the instance ``after`` seconds into it."""

    def send() -> None:
        with contextlib.suppress(httpx.TransportError):  # it died: the answer never comes
            keyed(service, conversation, key, path, body)

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(after)
    service.kill()
    sender.join()


def lines(service: ServiceProcess, conversation: str) -> str:
    return str(run_command(service.client, conversation, "cat ran.log 2>/dev/null")["stdout"])


def test_a_retry_waits_for_the_command_the_dead_instance_started(
    pair: list[ServiceProcess],
) -> None:
    first, second = pair
    conversation, key = new_conversation(), str(uuid.uuid4())
    run_command(first.client, conversation, "true")  # the sandbox exists
    body = {"command": "sleep 4; echo once >> ran.log; echo done"}
    dies_while_running(first, conversation, key, "sandbox/runCommand", body, after=1.5)

    retry = keyed(second, conversation, key, "sandbox/runCommand", body)

    assert retry.status_code == 200, retry.text
    assert retry.json()["stdout"] == "done\n" and retry.json()["exitCode"] == 0
    assert lines(second, conversation) == "once\n"
    again = keyed(second, conversation, key, "sandbox/runCommand", body)
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json()["stdout"] == "done\n"


def test_a_retry_collects_the_result_of_a_command_that_ended_meanwhile(
    pair: list[ServiceProcess],
) -> None:
    first, second = pair
    conversation, key = new_conversation(), str(uuid.uuid4())
    run_command(first.client, conversation, "true")
    body = {"command": "echo once >> ran.log; sleep 1; echo done; exit 3"}
    dies_while_running(first, conversation, key, "sandbox/runCommand", body, after=0.5)
    time.sleep(2)  # the command has ended; its result waits in the sandbox's agent

    retry = keyed(second, conversation, key, "sandbox/runCommand", body)

    assert retry.status_code == 200, retry.text
    assert (retry.json()["stdout"], retry.json()["exitCode"]) == ("done\n", 3)
    assert lines(second, conversation) == "once\n"


def test_a_retry_never_reruns_a_command_the_sandbox_forgot(
    pair: list[ServiceProcess], docker_client: docker.DockerClient
) -> None:
    first, second = pair
    conversation, key = new_conversation(), str(uuid.uuid4())
    run_command(first.client, conversation, "true")
    body = {"command": "sleep 3; echo once >> ran.log"}
    dies_while_running(first, conversation, key, "sandbox/runCommand", body, after=1)
    docker_client.containers.get(sandbox_of(second, conversation)).restart(timeout=0)

    retry = keyed(second, conversation, key, "sandbox/runCommand", body)
    again = keyed(second, conversation, key, "sandbox/runCommand", body)

    assert retry.status_code == 409, retry.text
    assert retry.json()["error"]["code"] == "outcome_unknown"
    assert again.status_code == 409 and again.headers.get("idempotent-replayed") == "true"
    assert lines(second, conversation) == ""  # the restart ended it; nobody ran it again


def test_a_retry_after_the_sandbox_died_mid_call_never_runs_the_command_again(
    pair: list[ServiceProcess], docker_client: docker.DockerClient
) -> None:
    service = pair[0]  # the instance lives; its sandbox dies under the call
    conversation, key = new_conversation(), str(uuid.uuid4())
    run_command(service.client, conversation, "true")
    body = {"command": "echo started >> ran.log; sleep 3; echo once >> ran.log"}
    answers: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: answers.append(keyed(service, conversation, key, "sandbox/runCommand", body))
    )
    sender.start()
    time.sleep(1.5)
    # Killed: the agent has no moment to report (``docker stop`` gives it one, and the
    # call is answered with the command's exit code 143).
    docker_client.containers.get(sandbox_of(service, conversation)).kill()
    sender.join()

    retry = keyed(service, conversation, key, "sandbox/runCommand", body)

    assert answers[0].status_code == 503, answers[0].text
    assert answers[0].json()["error"]["code"] == "sandbox_unavailable"
    assert retry.status_code == 409, retry.text
    assert retry.json()["error"]["code"] == "outcome_unknown"
    assert lines(service, conversation) == "started\n"  # begun once, never again


def test_a_retry_of_a_call_that_never_reached_the_sandbox_runs_it(
    pair: list[ServiceProcess],
) -> None:
    first, second = pair
    conversation, key = new_conversation(), str(uuid.uuid4())
    run_command(first.client, conversation, "true")
    # The conversation is busy, so the keyed call waits for it and never starts.
    busy = threading.Thread(
        target=lambda: dies_while_running(
            first,
            conversation,
            str(uuid.uuid4()),
            "sandbox/runCommand",
            {"command": "sleep 30"},
            after=2.5,
        )
    )
    busy.start()
    time.sleep(1)
    body = {"command": "echo once >> ran.log; echo done"}
    waiting = threading.Thread(
        target=lambda: _quietly(lambda: keyed(first, conversation, key, "sandbox/runCommand", body))
    )
    waiting.start()
    busy.join()
    waiting.join()

    retry = keyed(second, conversation, key, "sandbox/runCommand", body)

    assert retry.status_code == 200, retry.text
    assert retry.json()["stdout"] == "done\n"
    assert lines(second, conversation) == "once\n"


def test_a_taken_over_script_is_not_run_again(pair: list[ServiceProcess]) -> None:
    first, second = pair
    conversation, key = new_conversation(), str(uuid.uuid4())
    body = {"code": "var t = Date.now(); while (Date.now() - t < 3000) {} 1"}
    dies_while_running(first, conversation, key, "js", body, after=1)

    retry = keyed(second, conversation, key, "js", body)

    assert retry.status_code == 409, retry.text
    assert retry.json()["error"]["code"] == "outcome_unknown"


def _quietly(call: Any) -> None:
    with contextlib.suppress(httpx.TransportError):
        call()
