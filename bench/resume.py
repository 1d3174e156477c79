"""Resume latency from paused and from stopped, against plain Docker, in one run.

    python -m bench.resume [--iterations N]

In-process (``Services`` on the Docker provider, SQLite state): a session is
suspended through the lifecycle (as reconciliation does), then a
``runCommand("true")`` resumes it and runs. The baseline does the same with the
Docker CLI on a second container: ``docker unpause`` / ``docker start``, then
``docker exec <c> true``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker

from bench.run_command import BENCH_LABEL, IMAGE_ID, IMAGE_REF, remove_labelled
from runtime.config import SandboxSettings, Settings
from runtime.context import CallContext
from runtime.lifecycle import Lifecycle
from runtime.services import Services


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    run_id = uuid.uuid4().hex[:8]
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
        settings = Settings(
            data_dir=Path(tmp),
            sandbox=SandboxSettings(extra_labels={BENCH_LABEL: run_id}),
        )
        services = Services.build(settings)
        try:
            report(measure(services, client, run_id, args.iterations))
        finally:
            services.close()
            remove_labelled(client, f"{BENCH_LABEL}={run_id}")
            client.close()
    return 0


def measure(
    services: Services, client: docker.DockerClient, run_id: str, iterations: int
) -> dict[str, list[float]]:
    ctx = CallContext("bench", "bench", f"resume-{run_id}", base_image=IMAGE_ID)
    services.sandbox.run_command(ctx, "true")
    lifecycle = Lifecycle(
        services.stores.sessions,
        services.stores.capacity,
        services.provider,
        services.settings.capacity,
    )
    baseline = str(
        client.containers.run(
            IMAGE_REF, detach=True, network_mode="none", labels={BENCH_LABEL: run_id}
        ).name
    )

    def suspend(transition: Callable[..., bool]) -> None:
        with services.leases.hold(ctx.key) as lease:
            record = services.stores.sessions.get_session(ctx.org, ctx.conversation)
            assert record is not None
            transition(record, lease)

    def ours(transition: Callable[..., bool]) -> float:
        suspend(transition)
        started = time.perf_counter()
        result = services.sandbox.run_command(ctx, "true")
        elapsed = (time.perf_counter() - started) * 1000
        assert result.resumed is not None and result.exitCode == 0
        return elapsed

    def docker_cli(suspend_cmd: str, resume_cmd: str) -> float:
        subprocess.run(["docker", suspend_cmd, baseline], check=True, capture_output=True)
        started = time.perf_counter()
        subprocess.run(["docker", resume_cmd, baseline], check=True, capture_output=True)
        subprocess.run(["docker", "exec", baseline, "true"], check=True)
        return (time.perf_counter() - started) * 1000

    samples: dict[str, list[float]] = {
        "api_resume_paused": [],
        "docker_unpause_exec": [],
        "api_resume_stopped": [],
        "docker_start_exec": [],
    }
    for _ in range(iterations):
        samples["api_resume_paused"].append(ours(lifecycle.pause))
        samples["docker_unpause_exec"].append(docker_cli("pause", "unpause"))
        samples["api_resume_stopped"].append(ours(lifecycle.stop))
        samples["docker_start_exec"].append(docker_cli("stop", "start"))
    return samples


def report(samples: dict[str, list[float]]) -> None:
    print(f"{'measure':<22}{'n':>4}{'p50 ms':>10}{'p90 ms':>10}")
    for name, values in samples.items():
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        print(f"{name:<22}{len(values):>4}{statistics.median(values):>10.1f}{p90:>10.1f}")
    for ours, baseline in (
        ("api_resume_paused", "docker_unpause_exec"),
        ("api_resume_stopped", "docker_start_exec"),
    ):
        ratio = statistics.median(samples[ours]) / statistics.median(samples[baseline])
        print(f"{ours} / {baseline}: p50 x{ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
