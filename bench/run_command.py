"""runCommand latency against plain Docker, measured in the same run.

    python -m bench.run_command [--iterations N] [--new-conversations M]

Starts a real service process (Docker provider), then measures, interleaved so
that machine noise hits both sides alike:

* warm ``runCommand("true")`` through the HTTP API, against ``docker exec
  <container> true`` (the CLI) and one exec through the Engine API (the SDK:
  create + start + inspect, what the service itself does);
* the first operation of a new conversation (provision + exec), against
  ``docker run --rm <image> true``.

Prints p50/p90 and the ratios. Everything it creates carries the label
``siesta.bench=<run id>`` and is removed at the end.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker

from tests.helpers import ServiceProcess, spawn_service

IMAGE_ID = "debian-base"
IMAGE_REF = "siesta/debian-base:1"
BENCH_LABEL = "siesta.bench"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--new-conversations", type=int, default=10)
    args = parser.parse_args()

    run_id = uuid.uuid4().hex[:8]
    token = uuid.uuid4().hex * 2
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as data_dir:
        service = start_service(Path(data_dir), token, run_id)
        try:
            report(measure(service, client, token, args.iterations, args.new_conversations))
        finally:
            service.stop()
            remove_labelled(client, f"{BENCH_LABEL}={run_id}")
            client.close()
    return 0


def start_service(data_dir: Path, token: str, run_id: str) -> ServiceProcess:
    env = {
        **os.environ,
        "SIESTA_API_TOKEN": token,
        "SIESTA_DATA_DIR": str(data_dir),
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({BENCH_LABEL: run_id}),
    }
    service = spawn_service(data_dir, env)
    return service


def measure(
    service: ServiceProcess,
    client: docker.DockerClient,
    token: str,
    iterations: int,
    new_conversations: int,
) -> dict[str, list[float]]:
    headers = {
        "Authorization": f"Bearer {token}",
        "X-Siesta-Org": "bench",
        "X-Siesta-User": "bench",
        "X-Siesta-Base-Image": IMAGE_ID,
    }

    def run_command(conversation: str) -> None:
        response = service.client.post(
            f"/v1/conversations/{conversation}/sandbox/runCommand",
            json={"command": "true"},
            headers=headers,
        )
        if response.status_code != 200 or response.json()["exitCode"] != 0:
            msg = f"runCommand failed: {response.text}"
            raise RuntimeError(msg)

    warm = f"bench-warm-{uuid.uuid4().hex[:6]}"
    run_command(warm)
    container = str(
        service.client.get(f"/v1/conversations/{warm}/sandbox", headers=headers).json()["sessionId"]
    )
    container = f"siesta-{container}"

    def sdk_exec() -> None:
        exec_id = client.api.exec_create(container, ["true"])["Id"]
        client.api.exec_start(exec_id)
        if client.api.exec_inspect(exec_id)["ExitCode"] != 0:
            msg = "sdk exec failed"
            raise RuntimeError(msg)

    def cli_exec() -> None:
        subprocess.run(["docker", "exec", container, "true"], check=True)

    samples: dict[str, list[float]] = {
        "api_run_command": [],
        "docker_exec_cli": [],
        "engine_api_exec": [],
        "api_first_operation": [],
        "docker_run_rm": [],
    }
    for _ in range(5):  # warm-up, not recorded
        run_command(warm)
        cli_exec()
        sdk_exec()
    for _ in range(iterations):
        samples["api_run_command"].append(timed(lambda: run_command(warm)))
        samples["docker_exec_cli"].append(timed(cli_exec))
        samples["engine_api_exec"].append(timed(sdk_exec))
    for _ in range(new_conversations):
        conversation = f"bench-new-{uuid.uuid4().hex[:6]}"
        samples["api_first_operation"].append(timed(functools.partial(run_command, conversation)))
        service.client.delete(f"/v1/conversations/{conversation}", headers=headers)
        samples["docker_run_rm"].append(
            timed(
                lambda: subprocess.run(
                    [
                        "docker",
                        "run",
                        "--rm",
                        "--network",
                        "none",
                        "--label",
                        f"{BENCH_LABEL}=docker-run",
                        IMAGE_REF,
                        "true",
                    ],
                    check=True,
                )
            )
        )
    service.client.delete(f"/v1/conversations/{warm}", headers=headers)
    return samples


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(samples: dict[str, list[float]]) -> None:
    print(f"{'measure':<22}{'n':>5}{'p50 ms':>10}{'p90 ms':>10}{'mean ms':>10}")
    for name, values in samples.items():
        print(
            f"{name:<22}{len(values):>5}{percentile(values, 0.5):>10.1f}"
            f"{percentile(values, 0.9):>10.1f}{statistics.fmean(values):>10.1f}"
        )
    p50 = {name: percentile(values, 0.5) for name, values in samples.items()}
    p90 = {name: percentile(values, 0.9) for name, values in samples.items()}
    print()
    for ours, baseline in (
        ("api_run_command", "docker_exec_cli"),
        ("api_run_command", "engine_api_exec"),
        ("api_first_operation", "docker_run_rm"),
    ):
        print(
            f"{ours} / {baseline}: p50 x{p50[ours] / p50[baseline]:.2f}, "
            f"p90 x{p90[ours] / p90[baseline]:.2f}"
        )


def remove_labelled(client: docker.DockerClient, label: str) -> None:
    for container in client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True, v=True)
    for volume in client.volumes.list(filters={"label": label}):
        volume.remove(force=True)


if __name__ == "__main__":
    sys.exit(main())
