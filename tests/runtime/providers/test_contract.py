"""The provider contract, run unchanged against Docker, Kubernetes (the API server
double of tests/k8s/apiserver.py, its pods on Docker) and the fake."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from runtime.core.errors import MetricsNotSupported, SandboxUnavailable
from runtime.providers.docker.lifecycle import DockerLifecycle
from runtime.providers.docker.provider import DockerProvider, docker_inside
from runtime.providers.fake import FakeProvider
from runtime.providers.kubernetes.provider import KubernetesProvider
from runtime.seams.provider_settings import KubernetesProviderSettings, SandboxSettings
from runtime.seams.providers import (
    ExecRequest,
    ExecResult,
    ProcessSpec,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
)
from tests.helpers import TEST_DEPLOYMENT, TEST_DISKS, TEST_RUN_ID, TEST_RUN_LABEL
from tests.k8s.apiserver import KUBERNETES_NAMESPACE, ApiServerDouble


def docker_provider() -> DockerProvider:
    """As the service builds it: fixed-size workspace and writable layer on loop disks."""
    return DockerProvider(
        SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}),
        deployment_id=TEST_DEPLOYMENT,
        disks=TEST_DISKS,
    )


class GvisorDockerLifecycle(DockerLifecycle):
    """Sandboxes of a catalog image that says ``runtime: runsc``: the same provider,
    every sandbox under gVisor."""

    def create(self, spec: SandboxSpec) -> str:
        return super().create(dataclasses.replace(spec, runtime="runsc"))


def gvisor_provider() -> SandboxProvider:
    lifecycle = GvisorDockerLifecycle(
        SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}),
        deployment_id=TEST_DEPLOYMENT,
        disks=TEST_DISKS,
    )
    return SandboxProvider(lifecycle, docker_inside(lifecycle))


def kubernetes_provider(api: ApiServerDouble, **sandbox: Any) -> KubernetesProvider:
    return KubernetesProvider(
        SandboxSettings(extra_labels={TEST_RUN_LABEL: TEST_RUN_ID}, **sandbox),
        KubernetesProviderSettings(api_url=api.url, namespace=KUBERNETES_NAMESPACE),
        deployment_id=TEST_DEPLOYMENT,
        resume_timeout_seconds=30,
    )


OUTPUT_LIMIT = 4096


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("gvisor", marks=pytest.mark.docker),
        pytest.param("kubernetes", marks=pytest.mark.docker),
        "fake",
    ]
)
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SandboxProvider]:
    if request.param in ("docker", "gvisor"):
        request.getfixturevalue("docker_client")  # session clean-up of labelled leftovers
        real = docker_provider() if request.param == "docker" else gvisor_provider()
        yield real
        real.close()
    elif request.param == "kubernetes":
        api: ApiServerDouble = request.getfixturevalue("kubernetes_api")
        rejected_before = len(api.rejected)
        kubernetes = kubernetes_provider(api)
        yield kubernetes
        kubernetes.close()
        assert api.rejected[rejected_before:] == []  # every body it sent was valid
    else:
        fake = FakeProvider(tmp_path / "fake")
        yield fake
        fake.close()


@pytest.fixture
def sandbox(provider: SandboxProvider) -> Iterator[str]:
    session_id = uuid.uuid4().hex
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(session_id, "siesta/debian-base:1", {"siesta.test": "contract"})
    )
    yield sandbox_id
    provider.lifecycle.destroy(sandbox_id)


def run(provider: SandboxProvider, sandbox: str, command: str, timeout: int = 30) -> ExecResult:
    return provider.inside.exec(sandbox, ExecRequest(command, timeout, OUTPUT_LIMIT, 1))


def test_created_sandbox_runs_and_is_listed(provider: SandboxProvider, sandbox: str) -> None:
    info = provider.lifecycle.inspect(sandbox)
    assert info.state is SandboxState.RUNNING
    assert sandbox in [s.sandbox_id for s in provider.lifecycle.list_sandboxes()]
    assert info.labels["siesta.test"] == "contract"


def test_exit_code_and_streams(provider: SandboxProvider, sandbox: str) -> None:
    result = run(provider, sandbox, "echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout.text, result.stderr.text) == (3, "out\n", "err\n")
    assert not result.timed_out


def test_files_persist_between_commands(provider: SandboxProvider, sandbox: str) -> None:
    run(provider, sandbox, "mkdir -p d && echo x > d/f")
    assert run(provider, sandbox, "cat d/f").stdout.text == "x\n"


def test_timeout_kills_background_children(provider: SandboxProvider, sandbox: str) -> None:
    result = run(provider, sandbox, "(sleep 303; echo late > late.txt) & sleep 304", timeout=1)
    assert result.timed_out
    assert result.duration_ms >= 1000
    check = run(
        provider,
        sandbox,
        "sleep 2; ls late.txt 2>/dev/null; ps -eo args | grep -c '^sleep 30[34]' || true",
    )
    assert check.stdout.text == "0\n"


def test_output_is_capped_head_and_tail(provider: SandboxProvider, sandbox: str) -> None:
    result = run(provider, sandbox, "echo BEGIN; seq 1 100000; echo END")
    assert result.stdout.truncated
    assert result.stdout.total_bytes == len("BEGIN\nEND\n") + sum(
        len(f"{i}\n") for i in range(1, 100001)
    )
    assert result.stdout.text.startswith("BEGIN\n1\n2\n")
    assert result.stdout.text.endswith("99999\n100000\nEND\n")
    assert len(result.stdout.text.encode()) <= OUTPUT_LIMIT + 64


def test_usage_is_read_from_outside_without_waking_the_sandbox(
    provider: SandboxProvider, sandbox: str
) -> None:
    lifecycle = provider.lifecycle
    if isinstance(provider, KubernetesProvider):  # no metrics API wired: refused
        with pytest.raises(MetricsNotSupported):
            lifecycle.usage(sandbox)
        return
    running = lifecycle.usage(sandbox)
    lifecycle.pause(sandbox)
    paused = lifecycle.usage(sandbox)
    still_paused = lifecycle.inspect(sandbox).state
    lifecycle.unpause(sandbox)
    lifecycle.stop(sandbox)
    stopped = lifecycle.usage(sandbox)
    lifecycle.start(sandbox)

    assert running.state is SandboxState.RUNNING and running.cpu_limit > 0
    assert running.cpu_seconds is not None and running.memory_used_bytes is not None
    assert running.pids is not None and running.pids >= 1
    assert running.workspace is not None and running.workspace.total_bytes > 0
    assert (paused.state, still_paused) == (SandboxState.PAUSED, SandboxState.PAUSED)
    assert paused.memory_used_bytes is not None
    assert stopped.state is SandboxState.STOPPED
    assert (stopped.cpu_seconds, stopped.memory_used_bytes, stopped.pids) == (None, None, None)
    assert lifecycle.usage(f"{sandbox}-nosuch").state is SandboxState.MISSING


def test_suspended_sandboxes_resume_with_their_workspace(
    provider: SandboxProvider, sandbox: str
) -> None:
    run(provider, sandbox, "echo kept > notes.txt")
    provider.lifecycle.pause(sandbox)
    paused = provider.lifecycle.inspect(sandbox).state
    provider.lifecycle.unpause(sandbox)
    after_pause = run(provider, sandbox, "cat notes.txt").stdout.text
    provider.lifecycle.stop(sandbox)
    stopped = provider.lifecycle.inspect(sandbox).state
    listed = {s.sandbox_id: s.state for s in provider.lifecycle.list_sandboxes()}
    workspaces = [w.name for w in provider.lifecycle.list_workspaces()]
    provider.lifecycle.start(sandbox)
    after_stop = run(provider, sandbox, "cat notes.txt").stdout.text

    assert paused is SandboxState.PAUSED
    assert (stopped, listed[sandbox]) == (SandboxState.STOPPED, SandboxState.STOPPED)
    assert sandbox in workspaces  # the workspace is listed on its own too
    assert after_pause == after_stop == "kept\n"
    assert provider.lifecycle.inspect(sandbox).state is SandboxState.RUNNING


def test_a_suspended_sandbox_is_destroyed_whole(provider: SandboxProvider) -> None:
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {})
    )
    provider.lifecycle.stop(sandbox_id)
    provider.lifecycle.destroy(sandbox_id)
    assert provider.lifecycle.inspect(sandbox_id).state is SandboxState.MISSING
    assert sandbox_id not in [w.name for w in provider.lifecycle.list_workspaces()]


def test_destroy_is_idempotent(provider: SandboxProvider) -> None:
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {})
    )
    provider.lifecycle.destroy(sandbox_id)
    provider.lifecycle.destroy(sandbox_id)
    assert provider.lifecycle.inspect(sandbox_id).state is SandboxState.MISSING


@pytest.mark.docker
def test_docker_sandbox_is_hardened(docker_client: docker.DockerClient) -> None:
    settings = SandboxSettings(
        memory_limit_mb=256,
        cpu_limit=0.5,
        pids_limit=64,
        extra_labels={TEST_RUN_LABEL: TEST_RUN_ID},
    )
    provider = DockerProvider(settings, deployment_id=TEST_DEPLOYMENT)
    session_id = uuid.uuid4().hex
    labels = {
        "siesta.org": "o",
        "siesta.conversation": "c",
        "siesta.session": session_id,
        "siesta.image-id": "debian-base",
    }
    sandbox_id = provider.lifecycle.create(SandboxSpec(session_id, "siesta/debian-base:1", labels))
    try:
        attrs = docker_client.api.inspect_container(sandbox_id)
        host = attrs["HostConfig"]
        volume = docker_client.volumes.get(sandbox_id)
        inside = run(provider, sandbox_id, "cat /proc/1/comm; ls /sys/class/net; id -u")
        fork_bomb = run(
            provider, sandbox_id, "for i in $(seq 100); do sleep 5 & done; wait", timeout=20
        )
    finally:
        provider.lifecycle.destroy(sandbox_id)
        provider.close()

    # What the service sets at creation; the container also inherits the image's own
    # labels (say, siesta.sandbox-image), which mean nothing about ownership.
    expected_labels = {**labels, "siesta.deployment": TEST_DEPLOYMENT, TEST_RUN_LABEL: TEST_RUN_ID}
    container_labels = attrs["Config"]["Labels"]
    assert {k: container_labels.get(k) for k in expected_labels} == expected_labels
    assert volume.attrs["Labels"] == expected_labels
    assert host["CapDrop"] == ["ALL"]
    assert set(host["CapAdd"]) <= {
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "SETUID",
        "SETGID",
        "KILL",
    }
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 64
    assert host["Memory"] == 256 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["NetworkMode"] == "none"
    assert host["Privileged"] is False
    assert [m["Destination"] for m in attrs["Mounts"]] == ["/mnt/work"]
    assert inside.stdout.text.split() == [
        "siesta-agent",
        "lo",
        "0",
    ]  # the agent is the init (PID 1), no network but loopback
    assert "Resource temporarily unavailable" in fork_bomb.stderr.text  # pids limit holds


@pytest.mark.docker
def test_orphaned_children_are_reaped(docker_client: docker.DockerClient) -> None:
    provider = docker_provider()
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {})
    )
    try:
        # The shell exits at once; its children are orphaned and exit later.
        run(provider, sandbox_id, "for i in 1 2 3; do (sleep 0.2 &) ; done; true")
        zombies = run(provider, sandbox_id, "sleep 1; ps -eo stat | grep -c '^Z' || true")
    finally:
        provider.lifecycle.destroy(sandbox_id)
        provider.close()
    assert zombies.stdout.text == "0\n"


@pytest.mark.docker
def test_background_processes_of_finished_commands_survive_but_orphans_do_not(
    docker_client: docker.DockerClient,
) -> None:
    provider = docker_provider()
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {})
    )
    try:
        run(provider, sandbox_id, "nohup sleep 305 >/dev/null 2>&1 &")
        # A command whose caller died (no one reads it, it still runs) ...
        orphan = threading.Thread(target=run, args=(provider, sandbox_id, "sleep 306", 60))
        orphan.start()
        time.sleep(1)
        # ... is ended when the next operation starts; the finished one's child stays.
        survivors = run(provider, sandbox_id, "ps -eo args | grep '^sleep 30[56]' | sort")
        orphan.join(10)
    finally:
        provider.lifecycle.destroy(sandbox_id)
        provider.close()
    assert not orphan.is_alive()
    assert survivors.stdout.text == "sleep 305\n"


def test_cancel_exec_kills_the_running_command(provider: SandboxProvider, sandbox: str) -> None:
    results: list[ExecResult] = []
    worker = threading.Thread(
        target=lambda: results.append(run(provider, sandbox, "sleep 307 & sleep 308", 60))
    )
    worker.start()
    time.sleep(1)
    provider.inside.cancel_exec(sandbox)
    worker.join(10)
    assert not worker.is_alive()
    assert results[0].exit_code != 0 and not results[0].timed_out
    left = run(provider, sandbox, "ps -eo args | grep -c '^sleep 30[78]' || true")
    assert left.stdout.text == "0\n"


@pytest.mark.docker
def test_exec_into_a_stopped_sandbox_is_a_clear_error(docker_client: docker.DockerClient) -> None:
    provider = docker_provider()
    sandbox_id = provider.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {})
    )
    try:
        provider.lifecycle.stop(sandbox_id)
        with pytest.raises(SandboxUnavailable, match="try again"):
            run(provider, sandbox_id, "true")
    finally:
        provider.lifecycle.destroy(sandbox_id)
        provider.close()


@pytest.mark.docker
@pytest.mark.parametrize("make", [docker_provider, gvisor_provider], ids=["docker", "gvisor"])
def test_a_second_instance_lists_and_reads_a_process_it_did_not_start(
    docker_client: docker.DockerClient, make: Any
) -> None:
    """Two providers as two service instances would have them, each with its own
    channel to the sandbox's agent (an engine exec of its relay): the process one
    starts, the other lists with its tag and reads from its first byte. Under gVisor
    too: the agent lets a relay in by the credentials of its first byte."""
    first: SandboxProvider = make()
    second: SandboxProvider = make()
    sandbox_id = first.lifecycle.create(
        SandboxSpec(uuid.uuid4().hex, "siesta/debian-base:1", {"siesta.test": "contract"})
    )
    try:
        spec = ProcessSpec(["sh", "-c", "echo one; echo two"], 30, 0, 1, ring_bytes=4096, tag="t")
        started = first.inside.start_process(sandbox_id, spec)
        started.wait(lambda stream, data: None)
        entries = second.inside.process_table(sandbox_id)
        assert entries is not None, "no channel of its own: only the shared attach"
        entry = next(e for e in entries if e.pid == started.pid)
        output = second.inside.process_output(sandbox_id, entry, 0)
    finally:
        first.lifecycle.destroy(sandbox_id)
        first.close()
        second.close()
    assert (entry.tag, entry.running, entry.exit_code) == ("t", False, 0)
    assert {stream for stream, _ in output} == {"stdout"}
    assert b"".join(data for _, data in output) == b"one\ntwo\n"
