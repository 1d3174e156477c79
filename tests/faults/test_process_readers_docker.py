"""A fault run for what runs on in sandboxes: background processes and their readers
while the instances serving them are killed (SIGKILL) and rolled (SIGTERM).

Three instances on one Redis and the engine, behind the round-robin proxy of
``tests/fleet`` (every request to the next instance; an instance that cannot be
reached is answered 502, a stream it was serving is cut). Conversations start a
background process each, some before the faults and some while they happen (each
start retried by the Python client with its one ``Idempotency-Key``); every process
has two readers following it with ``follow_process``, which reads on from its offset
through whatever instance the next connection reaches. Meanwhile instances are
killed and rolled one after another, each started again on its data.

What must hold: every process ran once (its first line appends to a file: once per
conversation), ran to its end (exit 0), and
every reader got every line once, in order (the ring, 1 MiB, keeps them all); a
rolled instance stopped within seconds (it hands its streams off) though its drain
time is a minute.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import docker
import pytest

from siesta_client import Conversation, ProcessEnded, ProcessOutput, Retries, SiestaClient
from tests.fleet.conftest import Fleet
from tests.fleet.roundrobin import RoundRobinProxy
from tests.helpers import TOKEN, StartService, new_conversation
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]

LINES = 500
COMMAND = (
    f"echo started >> starts.txt; for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.04; done"
)
BEFORE, DURING = 2, 2
"""Processes started before the faults, and while they happen."""
READERS = 2
"""Readers following each process."""
FAULTS: list[tuple[int, signal.Signals]] = [
    (0, signal.SIGKILL),
    (1, signal.SIGTERM),
    (2, signal.SIGKILL),
    (0, signal.SIGTERM),
    (1, signal.SIGKILL),
]
FAULT_GAP = 3.0
"""Seconds between one instance being back and the next fault."""
DRAIN_SECONDS = 60
STOP_WITHIN = 20.0
"""A rolled instance stops well within its drain time: its streams are handed off."""
RETRIES = Retries(attempts=15, backoff_seconds=0.2, max_backoff_seconds=2.0)
"""Enough to ride out an instance being down (about 3 s) whichever it lands on."""


@dataclass
class Reader:
    conversation: Conversation
    pid: int
    text: list[str] = field(default_factory=list)
    ended: ProcessEnded | None = None
    failed: BaseException | None = None

    def follow(self) -> None:
        try:
            for event in self.conversation.follow_process(self.pid):
                if isinstance(event, ProcessOutput):
                    self.text.append(event.text)
                elif isinstance(event, ProcessEnded):
                    self.ended = event
        except BaseException as error:  # the assertion reports it
            self.failed = error


@pytest.fixture
def fleet(
    start_service: StartService,
    tmp_path_factory: pytest.TempPathFactory,
    docker_client: docker.DockerClient,
) -> Iterator[Fleet]:
    redis = RedisServer(tmp_path_factory.mktemp("redis"))
    redis.start()
    instances = [
        start_service(
            "docker",
            SIESTA_STORE__URL=redis.url,
            SIESTA_HTTP__DRAIN_SECONDS=str(DRAIN_SECONDS),
            SIESTA_RECONCILE__BACKGROUND="false",
        )
        for _ in range(3)
    ]
    proxy = RoundRobinProxy([instance.base_url for instance in instances])
    proxy.start()
    fleet = Fleet(instances, proxy)
    try:
        yield fleet
    finally:
        proxy.stop()
        for started in fleet.respawned:
            started.stop()
        redis.stop()


def test_processes_run_once_and_readers_miss_nothing_while_instances_fail(fleet: Fleet) -> None:
    siesta = SiestaClient(fleet.url, TOKEN, retries=RETRIES)
    conversations = [
        siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        for _ in range(BEFORE + DURING)
    ]
    readers: list[Reader] = []
    threads: list[threading.Thread] = []

    def start(conversation: Conversation) -> None:
        pid = conversation.start_process(COMMAND).pid
        for _ in range(READERS):
            reader = Reader(conversation, pid)
            readers.append(reader)
            threads.append(threading.Thread(target=reader.follow, daemon=True))
            threads[-1].start()

    stops: list[tuple[str, float]] = []
    try:
        for conversation in conversations[:BEFORE]:
            start(conversation)
        later = iter(conversations[BEFORE:])
        for number, (index, how) in enumerate(FAULTS):
            time.sleep(FAULT_GAP)
            took = fleet.stop(index, how, within=STOP_WITHIN)
            stops.append((how.name, took))
            if number % 2 == 0 and (another := next(later, None)) is not None:
                start(another)  # while an instance has just come back
        for thread in threads:
            thread.join(timeout=120)
        starts = {c.id: c.read_file("starts.txt").content for c in conversations}
    finally:
        for conversation in conversations:
            conversation.delete()
        siesta.close()

    print(f"\nprocess fault run: stops {stops}")
    assert len(readers) == (BEFORE + DURING) * READERS
    expected = [f"line-{i}" for i in range(1, LINES + 1)]
    for reader in readers:
        where = f"{reader.conversation.id} pid {reader.pid}"
        assert reader.failed is None, f"{where}: {reader.failed!r}"
        assert reader.ended is not None, f"{where}: no end after {len(reader.text)} chunks"
        assert reader.ended.process.exitCode == 0, where
        assert "".join(reader.text).splitlines() == expected, where
        route = f"/v1/conversations/{reader.conversation.id}/sandbox/processes/{reader.pid}"
        assert len(fleet.proxy.instances_of(route)) >= 2, f"{where}: never moved"
    for conversation in conversations:
        assert starts[conversation.id] == "started\n", f"{conversation.id}: not run once"
