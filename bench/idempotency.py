"""What ``Idempotency-Key`` costs per call: ``python -m bench.idempotency``.

A real ``siesta-runtime serve`` (fake provider) on SQLite, then on a private Redis;
per store, the same call alternately without and with a fresh key (the baseline is
the call without one, measured in the same run), and a replay of a kept answer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from tests.helpers import TOKEN, headers, spawn_service
from tests.redis_server import RedisServer


def measure(base_url: str, samples: int) -> list[str]:
    rows = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        conversation = f"bench-{uuid.uuid4().hex[:8]}"
        calls = {
            "images/validate": ("/v1/images/validate", {"baseImage": "debian-base"}),
            "runCommand true": (
                f"/v1/conversations/{conversation}/sandbox/runCommand",
                {"command": "true"},
            ),
        }
        for name, (path, body) in calls.items():
            timings: dict[bool, list[float]] = {False: [], True: []}
            for i in range(samples + 20):
                for keyed in (False, True):
                    sent = {**headers(), **({"Idempotency-Key": uuid.uuid4().hex} if keyed else {})}
                    started = time.perf_counter()
                    response = client.post(path, json=body, headers=sent)
                    elapsed = time.perf_counter() - started
                    assert response.status_code == 200, response.text
                    if i >= 20:  # warm-up left out
                        timings[keyed].append(elapsed)
            plain, keyed_p50 = (statistics.median(timings[k]) * 1000 for k in (False, True))
            rows.append(
                f"| {name} | {samples} | {plain:.2f} | {keyed_p50:.2f} | "
                f"{keyed_p50 - plain:+.2f} | x{keyed_p50 / plain:.2f} |"
            )
        path, body = calls["runCommand true"]
        replayed = {**headers(), "Idempotency-Key": "bench-replay"}
        client.post(path, json=body, headers=replayed)
        replays = []
        for _ in range(samples):
            started = time.perf_counter()
            client.post(path, json=body, headers=replayed)
            replays.append(time.perf_counter() - started)
        rows.append(
            f"| replay of runCommand | {samples} | | {statistics.median(replays) * 1000:.2f} | | |"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=300)
    samples = parser.parse_args().samples
    print("| call | n | p50 ms, no key | p50 ms, key | difference | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        redis_server = RedisServer(Path(tmp) / "redis")
        redis_server.start()
        try:
            for store, extra in (
                ("sqlite", {}),
                ("redis", {"SIESTA_STORE__URL": redis_server.url}),
            ):
                data_dir = Path(tmp) / store
                environment = {
                    **os.environ,
                    "SIESTA_API_TOKEN": TOKEN,
                    "SIESTA_DATA_DIR": str(data_dir),
                    "SIESTA_PROVIDER__TYPE": "fake",
                    "SIESTA_POOL__ENABLED": "false",
                    **extra,
                }
                service = spawn_service(data_dir, environment)
                try:
                    for row in measure(service.base_url, samples):
                        print(row.replace("| ", f"| {store}: ", 1))
                finally:
                    service.stop()
        finally:
            redis_server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
