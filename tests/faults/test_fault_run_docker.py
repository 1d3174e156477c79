"""A fault run: clients append numbered lines while everything underneath fails.

Two service instances on one Redis (append-only, fsync always) and a Docker engine of
the run's own. Clients append one numbered line per ``runCommand``, each call with its
own ``Idempotency-Key``, retried on the other instance after an error, as a careful
client does. Meanwhile, one after another: an instance is killed mid-call (SIGKILL)
and started again, Redis restarts, a sandbox is killed, a sandbox's agent is killed,
the engine restarts, the other instance is killed.

What must hold: every acknowledged line (answered 200 with exit code 0) is in its
conversation's file, and no line is there twice (no command ran twice). A call
answered ``outcome_unknown`` was not acknowledged: its line may or may not be there,
once at most. Background processes and their readers have a fault run of their own:
``test_process_readers_docker.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import httpx
import pytest
import yaml
from docker.models.containers import Container

from runtime.seams.providers import CONVERSATION_LABEL
from tests.faults.engine import PrivateEngine
from tests.helpers import (
    REPO,
    TEST_RUN_ID,
    TEST_RUN_LABEL,
    ServiceProcess,
    StartService,
    headers,
    new_conversation,
    respawn,
)
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]

IMAGE = "siesta/debian-base:1"
CLIENTS = 6
CALLS = 50
PACE = 0.6
"""Seconds a client waits between two calls: the run spans every fault."""
CALL_DEADLINE = 90.0
"""How long one client keeps retrying one call before the run fails."""
FAULT_GAP = 4.0
"""Traffic between two faults, in seconds."""
FAULTS = 7


@dataclass
class Outcomes:
    acknowledged: dict[str, set[str]] = field(default_factory=dict)
    unknown: dict[str, set[str]] = field(default_factory=dict)
    attempts: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    gave_up: dict[str, list[str]] = field(default_factory=dict)
    """A call retried past its deadline: the answers it got, for the failure message."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class Fleet:
    """The two instances; a killed one is started again on its data."""

    def __init__(self, instances: list[ServiceProcess]) -> None:
        self._instances = instances
        self._lock = threading.Lock()
        self.every: list[ServiceProcess] = list(instances)

    def pick(self, index: int) -> ServiceProcess:
        with self._lock:
            return self._instances[index % len(self._instances)]

    def kill_and_restart(self, index: int) -> None:
        with self._lock:
            dying = self._instances[index]
        dying.kill()
        time.sleep(0.5)
        reborn = respawn(dying)
        with self._lock:
            self._instances[index] = reborn
            self.every.append(reborn)

    def stop(self) -> None:
        for service in self.every:
            with contextlib.suppress(Exception):
                service.stop()


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient) -> Iterator[PrivateEngine]:
    private = PrivateEngine([IMAGE])
    try:
        private.start()
        private.load_images(docker_client)
        yield private
    finally:
        private.remove(f"{TEST_RUN_LABEL}={TEST_RUN_ID}")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def test_no_acknowledged_write_is_lost_and_no_command_runs_twice(
    start_service: StartService, engine: PrivateEngine, redis: RedisServer, tmp_path: Path
) -> None:
    catalog = yaml.safe_load((REPO / "images" / "catalog.yaml").read_text())
    catalog["images"] = [i for i in catalog["images"] if i["image"] == IMAGE]
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    fleet = Fleet(
        [
            start_service(
                "docker",
                SIESTA_STORE__URL=redis.url,
                SIESTA_PROVIDER__BASE_URL=engine.url,
                SIESTA_SANDBOX__DISK_DIR=str(engine.disk_dir),
                SIESTA_IMAGES__CATALOG_PATH=str(tmp_path / "catalog.yaml"),
                SIESTA_IDEMPOTENCY__HOLD_SECONDS="2",
                SIESTA_LEASE__TTL_SECONDS="3",
                SIESTA_RECONCILE__BACKGROUND="false",
            )
            for _ in range(2)
        ]
    )
    conversations = [new_conversation() for _ in range(CLIENTS)]
    outcomes = Outcomes()
    faulted = threading.Event()
    try:
        clients = [
            threading.Thread(
                target=_client, args=(fleet, c, i, outcomes, faulted), name=f"client-{i}"
            )
            for i, c in enumerate(conversations)
        ]
        for client in clients:
            client.start()
        applied = _faults(fleet, redis, engine, conversations, clients)
        faulted.set()
        for client in clients:
            client.join(timeout=(CALLS + 1) * CALL_DEADLINE)
        written = {c: _lines(fleet, c) for c in conversations}
    finally:
        fleet.stop()

    acknowledged = sum(len(lines) for lines in outcomes.acknowledged.values())
    unknown = sum(len(lines) for lines in outcomes.unknown.values())
    print(
        f"\nfault run: {outcomes.calls} calls, {acknowledged} acknowledged, {unknown} "
        f"outcome unknown, {sum(outcomes.attempts.values())} attempts"
    )
    assert not outcomes.gave_up, f"calls retried past {CALL_DEADLINE} s: {outcomes.gave_up}"
    assert applied == FAULTS, "the clients were through before every fault happened"
    assert outcomes.calls >= CLIENTS * CALLS
    assert acknowledged + unknown == outcomes.calls, "a client gave up on a call"
    for conversation in conversations:
        counts = Counter(written[conversation])
        twice = sorted(line for line, count in counts.items() if count > 1)
        assert not twice, f"{conversation}: ran twice: {twice}"
        lost = outcomes.acknowledged.get(conversation, set()) - set(counts)
        assert not lost, f"{conversation}: acknowledged but lost: {sorted(lost)}"


def _client(
    fleet: Fleet, conversation: str, number: int, outcomes: Outcomes, faulted: threading.Event
) -> None:
    """At least CALLS calls, and on until every fault happened (the run spans them all)."""
    call = -1
    while (call := call + 1) < CALLS or not faulted.is_set():
        with outcomes.lock:
            outcomes.calls += 1
        time.sleep(PACE)
        line = f"{number}-{call}"
        key = str(uuid.uuid4())
        body = {"command": f"echo {line} >> lines.txt"}
        deadline = time.monotonic() + CALL_DEADLINE
        attempt = 0
        answers: list[str] = []
        while True:
            if time.monotonic() > deadline:
                with outcomes.lock:
                    outcomes.gave_up[f"{conversation} line {line}"] = answers[-8:]
                return  # this client is stuck: the run fails, with what it was told
            service = fleet.pick(number + attempt)  # each retry goes to the other instance
            attempt += 1
            with outcomes.lock:
                outcomes.attempts[conversation] += 1
            try:
                response = service.client.post(
                    f"/v1/conversations/{conversation}/sandbox/runCommand",
                    json=body,
                    headers={**headers(), "Idempotency-Key": key},
                    timeout=60,
                )
            except httpx.TransportError as exc:
                answers.append(f"{service.base_url}: {type(exc).__name__}")
                time.sleep(0.3)
                continue
            try:
                answer = response.json() if response.content else {}
            except ValueError:
                answer = {}
            code = (answer.get("error") or {}).get("code")
            answers.append(
                f"{service.base_url}: {response.status_code} {code or response.text[:120]}"
            )
            if response.status_code == 200 and answer.get("exitCode") == 0:
                with outcomes.lock:
                    outcomes.acknowledged.setdefault(conversation, set()).add(line)
                break
            if code == "outcome_unknown" or response.status_code == 200:
                with outcomes.lock:
                    outcomes.unknown.setdefault(conversation, set()).add(line)
                break
            time.sleep(0.3)  # "try again": 5xx, session_busy, lease_expired


def _faults(
    fleet: Fleet,
    redis: RedisServer,
    engine: PrivateEngine,
    conversations: list[str],
    clients: list[threading.Thread],
) -> int:
    """Applies the faults one after another while clients run; returns how many."""
    client = engine.client()

    def sandbox(conversation: str) -> Container:
        found = client.containers.list(
            all=True, filters={"label": f"{CONVERSATION_LABEL}={conversation}"}
        )
        return found[0]

    def restart_redis() -> None:
        redis.stop()
        time.sleep(1)
        redis.start()

    def kill_agent() -> None:
        container = sandbox(conversations[1])
        container.reload()
        pid = int(container.attrs["State"]["Pid"])
        if pid:
            os.kill(pid, signal.SIGKILL)

    faults: list[Callable[[], None]] = [
        lambda: fleet.kill_and_restart(0),
        restart_redis,
        lambda: sandbox(conversations[0]).kill(),
        kill_agent,
        lambda: fleet.kill_and_restart(1),
        engine.restart,
        lambda: fleet.kill_and_restart(0),
    ]
    assert len(faults) == FAULTS
    applied = 0
    try:
        for fault in faults:
            time.sleep(FAULT_GAP)
            if not any(thread.is_alive() for thread in clients):
                break  # the clients are through; the rest would hit nothing
            fault()
            applied += 1
    finally:
        client.close()
    return applied


def _lines(fleet: Fleet, conversation: str) -> list[str]:
    deadline = time.monotonic() + CALL_DEADLINE
    answer = ""
    while True:
        try:
            response = fleet.pick(0).client.post(
                f"/v1/conversations/{conversation}/sandbox/readFile",
                json={"path": "lines.txt"},
                headers=headers(),
            )
            if response.status_code == 200:
                return str(response.json()["content"]).split()
            answer = f"{response.status_code} {response.text[:300]}"
        except httpx.TransportError as exc:
            answer = type(exc).__name__
        if time.monotonic() > deadline:
            instances = {service.data_dir: service for service in fleet.every}.values()
            logs = "\n".join(  # a respawned instance goes on in its predecessor's log
                f"{service.data_dir.name}: {line}"
                for service in instances
                for line in service.log(tail=None).splitlines()
                if "WARNING" in line or "ERROR" in line
            )
            pytest.fail(f"could not read {conversation}'s lines: {answer}\n{logs[-20000:]}")
        time.sleep(0.5)
