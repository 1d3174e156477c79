"""What every benchmark needs: a labelled service, timing, percentiles, clean-up."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import httpx

from runtime.providers.docker.disks import DEFAULT_DISK_ROOT
from tests.helpers import ServiceProcess, remove_labelled, spawn_service

IMAGE_ID = "debian-base"
IMAGE_REF = "siesta/debian-base:1"
BENCH_LABEL = "siesta.bench"


@dataclass
class Bench:
    """One benchmark run: its id (labels everything it makes) and its service."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    token: str = field(default_factory=lambda: uuid.uuid4().hex * 2)

    @property
    def label(self) -> str:
        return f"{BENCH_LABEL}={self.run_id}"

    def headers(self, user: str = "bench") -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.token}",
            "X-Siesta-Org": "bench",
            "X-Siesta-User": user,
            "X-Siesta-Base-Image": IMAGE_ID,
        }

    def start(self, data_dir: Path, **settings: str) -> ServiceProcess:
        env = {
            **os.environ,
            "SIESTA_API_TOKEN": self.token,
            "SIESTA_DATA_DIR": str(data_dir),
            "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({BENCH_LABEL: self.run_id}),
            "SIESTA_SANDBOX__DISK_DIR": str(self.disk_root),
            # The pool figures poll siesta_pool_members: counted often, not every 15 s.
            "SIESTA_METRICS__FLEET_REFRESH_SECONDS": "0.2",
            **settings,
        }
        return spawn_service(data_dir, env)

    def call(
        self, client: httpx.Client, conversation: str, function: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        response = client.post(
            f"/v1/conversations/{conversation}/sandbox/{function}",
            json=body,
            headers=self.headers(),
        )
        if response.status_code != 200:
            msg = f"{function} failed: {response.status_code} {response.text[:300]}"
            raise RuntimeError(msg)
        result: dict[str, Any] = response.json()
        return result

    def sandbox_of(self, service: ServiceProcess, conversation: str) -> str:
        response = service.client.get(
            f"/v1/conversations/{conversation}/sandbox", headers=self.headers()
        )
        return f"siesta-{response.json()['sessionId']}"

    @property
    def disk_root(self) -> Path:
        return DEFAULT_DISK_ROOT / f"bench-{self.run_id}"

    def remove_everything(self, client: docker.DockerClient) -> None:
        remove_labelled(client, self.label, self.disk_root)


def run_alone(
    description: str,
    quick_help: str,
    measure: Callable[[Bench, ServiceProcess, bool], list[Any]],
    **settings: str,
) -> None:
    """One measure alone (``python -m bench.NAME [--quick]``), on a service of its own
    started as the suite starts its, with everything it made removed after."""
    from bench.suite import render  # the suite imports the measures: not at the top

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    quick = bool(parser.parse_args().quick)
    bench = Bench()
    client = docker.from_env()
    try:
        with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
            service = bench.start(Path(tmp), **settings)
            try:
                figures = measure(bench, service, quick)
            finally:
                service.stop()
    finally:
        bench.remove_everything(client)
        client.close()
    print(render(figures))


def timed(action: Callable[[], object]) -> float:
    """Milliseconds ``action`` took."""
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def median(values: list[float]) -> float:
    return statistics.median(values)
