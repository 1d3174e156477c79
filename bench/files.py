"""writeFile + readFile through the API against ``docker cp``, measured in one run.

    python -m bench.files [--repeats N]

For a 1 MB and a 50 MB text file: one ``writeFile`` then one ``readFile`` of
the whole file over HTTP (JSON, the way an agent backend calls them), against
``docker cp`` into the same container and back out. The service runs with
write/read limits raised to fit the 50 MB file (the defaults are 1 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker

from bench.run_command import BENCH_LABEL, IMAGE_ID, remove_labelled
from tests.helpers import ServiceProcess, spawn_service

SIZES = {"1MB": 1_000_000, "50MB": 50_000_000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    run_id = uuid.uuid4().hex[:8]
    token = uuid.uuid4().hex * 2
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
        service = start(Path(tmp), token, run_id)
        try:
            report(measure(service, token, Path(tmp), args.repeats))
        finally:
            service.stop()
            remove_labelled(client, f"{BENCH_LABEL}={run_id}")
            client.close()
    return 0


def start(data_dir: Path, token: str, run_id: str) -> ServiceProcess:
    big = str(64 * 1024 * 1024)
    env = {
        **os.environ,
        "SIESTA_API_TOKEN": token,
        "SIESTA_DATA_DIR": str(data_dir),
        "SIESTA_SANDBOX__EXTRA_LABELS": json.dumps({BENCH_LABEL: run_id}),
        "SIESTA_FILES__MAX_WRITE_BYTES": big,
        "SIESTA_FILES__MAX_READ_BYTES": big,
        "SIESTA_HTTP__MAX_REQUEST_BYTES": str(128 * 1024 * 1024),
    }
    service = spawn_service(data_dir, env)
    return service


def measure(
    service: ServiceProcess, token: str, tmp: Path, repeats: int
) -> dict[str, dict[str, list[float]]]:
    headers = {
        "Authorization": f"Bearer {token}",
        "X-Siesta-Org": "bench",
        "X-Siesta-User": "bench",
        "X-Siesta-Base-Image": IMAGE_ID,
    }
    conversation = f"bench-files-{uuid.uuid4().hex[:6]}"
    base = f"/v1/conversations/{conversation}/sandbox"
    service.client.post(f"{base}/runCommand", json={"command": "true"}, headers=headers)
    session = service.client.get(f"/v1/conversations/{conversation}/sandbox", headers=headers)
    container = f"siesta-{session.json()['sessionId']}"
    results: dict[str, dict[str, list[float]]] = {}
    for label, size in SIZES.items():
        text = ("0123456789abcdef" * (size // 16 + 1))[:size]
        local = tmp / f"{label}.txt"
        local.write_text(text)
        back = tmp / f"{label}.back"
        api, cp = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            written = service.client.post(
                f"{base}/writeFile",
                json={"path": f"{label}.txt", "content": text},
                headers=headers,
            )
            read = service.client.post(
                f"{base}/readFile", json={"path": f"{label}.txt"}, headers=headers
            )
            api.append((time.perf_counter() - started) * 1000)
            if written.status_code != 200 or read.json().get("content") != text:
                msg = f"API round trip failed: {written.text[:300]} {read.text[:300]}"
                raise RuntimeError(msg)

            started = time.perf_counter()
            subprocess.run(
                ["docker", "cp", str(local), f"{container}:/mnt/work/{label}.cp"], check=True
            )
            subprocess.run(
                ["docker", "cp", f"{container}:/mnt/work/{label}.cp", str(back)], check=True
            )
            cp.append((time.perf_counter() - started) * 1000)
        results[label] = {"api_write_read": api, "docker_cp_in_out": cp}
    service.client.delete(f"/v1/conversations/{conversation}", headers=headers)
    return results


def report(results: dict[str, dict[str, list[float]]]) -> None:
    print(f"{'size':<6}{'measure':<20}{'n':>4}{'median ms':>12}{'min ms':>10}{'MB/s':>8}")
    for label, measures in results.items():
        for name, values in measures.items():
            median = statistics.median(values)
            rate = 2 * SIZES[label] / 1e6 / (median / 1000)
            print(
                f"{label:<6}{name:<20}{len(values):>4}{median:>12.1f}{min(values):>10.1f}"
                f"{rate:>8.1f}"
            )
        ratio = statistics.median(measures["api_write_read"]) / statistics.median(
            measures["docker_cp_in_out"]
        )
        print(f"{label:<6}api / docker cp: x{ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
