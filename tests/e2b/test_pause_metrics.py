"""The stock ``e2b`` SDK's ``pause`` and ``get_metrics``, unmodified, on Docker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from e2b import Sandbox, SandboxNotFoundException

from runtime.core.records import E2bSandbox
from runtime.store.sqlite import open_sqlite
from tests.e2b.conftest import ORG_A, TOKEN_A, TOKEN_B, E2bService

pytestmark = [pytest.mark.docker]
MIB = 1024 * 1024


@pytest.fixture
def sandbox(e2b: E2bService) -> Iterator[Sandbox]:
    made = Sandbox.create("base", **e2b.options())
    yield made
    Sandbox.kill(made.sandbox_id, **e2b.options())


def test_pause_keeps_files_and_processes_and_connect_resumes_them(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    sandbox.files.write("kept.txt", "still here")
    sleeper = sandbox.commands.run("sleep 600", background=True, timeout=0)

    assert sandbox.pause() is True
    assert Sandbox.pause(sandbox.sandbox_id, **e2b.options()) is False  # paused already
    assert sandbox.get_info().state.value == "paused"
    listed = Sandbox.list(**e2b.options()).next_items()
    assert {s.sandbox_id: s.state.value for s in listed}[sandbox.sandbox_id] == "paused"
    assert sandbox.is_running() is False  # envd: "not running" until connected again
    # Measured asleep, and not woken by it.
    [asleep] = sandbox.get_metrics()
    assert asleep.cpu_used_pct == 0.0 and asleep.mem_used > 0
    assert sandbox.get_info().state.value == "paused"

    resumed = Sandbox.connect(sandbox.sandbox_id, **e2b.options())
    assert resumed.get_info().state.value == "running"
    assert resumed.files.read("kept.txt") == "still here"
    alive = resumed.commands.run(f"kill -0 {sleeper.pid} && echo alive")
    assert alive.stdout == "alive\n"


def test_a_filesystem_pause_keeps_the_disk_and_ends_the_processes(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    sandbox.files.write("kept.txt", "on disk")
    sandbox.commands.run("sleep 600", background=True, timeout=0)
    assert sandbox.pause(mode="filesystem") is True
    assert sandbox.get_info().state.value == "paused"
    assert sandbox.get_metrics() == []  # nothing runs to measure

    resumed = Sandbox.connect(sandbox.sandbox_id, **e2b.options())
    assert resumed.files.read("kept.txt") == "on disk"
    assert resumed.commands.run("pgrep -x sleep || echo none").stdout == "none\n"


def test_metrics_are_the_sandboxes_own_in_e2bs_shape(sandbox: Sandbox, e2b: E2bService) -> None:
    sandbox.commands.run("head -c 20M /dev/urandom > big.bin && sync")
    [sample] = sandbox.get_metrics()
    assert (sample.cpu_count, sample.mem_total) == (1, 1024 * MIB)
    assert 0 <= sample.cpu_used_pct <= 100 and sample.mem_used > 0
    assert sample.disk_used >= 20 * MIB and sample.disk_total > sample.disk_used
    assert abs(sample.timestamp - datetime.now(UTC)) < timedelta(seconds=30)
    # A window that ended long ago has no sample: none is kept from then.
    old = datetime.now(UTC) - timedelta(hours=1)
    assert sandbox.get_metrics(start=old - timedelta(hours=1), end=old) == []

    many = httpx.get(
        f"{e2b.api_url}/sandboxes/metrics",
        params={"sandbox_ids": f"{sandbox.sandbox_id},nosuchsandbox"},
        headers={"X-API-Key": TOKEN_A},
    )
    assert many.status_code == 200, many.text
    assert set(many.json()["sandboxes"]) == {sandbox.sandbox_id}


def test_batch_metrics_measure_every_sandbox_and_skip_one_still_being_made(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    other = Sandbox.create("base", **e2b.options())
    # A create records its sandbox before the sandbox exists: mid-create, it is listed
    # but has nothing to measure yet.
    store = open_sqlite(e2b.service.data_dir / "siesta.db")
    making = f"making{uuid.uuid4().hex[:8]}"
    now = time.time()
    store.e2b.put_e2b(E2bSandbox(ORG_A, making, "e2b-a", "base", "token", now, now + 600))
    try:
        asked = [sandbox.sandbox_id, making, other.sandbox_id, "nosuchsandbox"]
        many = httpx.get(
            f"{e2b.api_url}/sandboxes/metrics",
            params={"sandbox_ids": ",".join(asked)},
            headers={"X-API-Key": TOKEN_A},
        )
        assert many.status_code == 200, many.text
        samples = many.json()["sandboxes"]
        assert set(samples) == {sandbox.sandbox_id, other.sandbox_id}
        assert all(s["memUsed"] > 0 and 0 <= s["cpuUsedPct"] <= 100 for s in samples.values())
    finally:
        store.e2b.delete_e2b(ORG_A, making)
        store.close()
        Sandbox.kill(other.sandbox_id, **e2b.options())


def test_another_orgs_token_neither_pauses_nor_measures_it(
    sandbox: Sandbox, e2b: E2bService
) -> None:
    with pytest.raises(SandboxNotFoundException):
        Sandbox.pause(sandbox.sandbox_id, **e2b.options(TOKEN_B))
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_metrics(sandbox.sandbox_id, **e2b.options(TOKEN_B))
    many = httpx.get(
        f"{e2b.api_url}/sandboxes/metrics",
        params={"sandbox_ids": sandbox.sandbox_id},
        headers={"X-API-Key": TOKEN_B},
    )
    assert many.json() == {"sandboxes": {}}
    assert sandbox.get_info().state.value == "running"
    with pytest.raises(SandboxNotFoundException):
        Sandbox.pause("nosuchsandbox", **e2b.options())
