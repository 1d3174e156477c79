"""Snapshots and forks of a loaded sandbox (issue 25).

    python -m bench.forks [--quick]      (and a step of ``python -m bench.suite``)

One sandbox with 1 GiB of random data in its workspace (``/mnt/work``) and 512 MiB
"installed" outside it (``/opt``, its writable layer), both from ``/dev/urandom`` so
nothing compresses or deduplicates. Then, over ``/v1``:

- a snapshot: the time of ``POST .../snapshots``, and its size on the host: the
  workspace copy's apparent and allocated bytes (``du --apparent-size`` / ``du``) and
  the committed image layer's bytes;
- forks (3, or 1 with ``--quick``): the time of ``POST .../fork`` (the source frozen
  while its layer is committed and its disk copied, then the fork's sandbox started),
  and the fork's first ``runCommand``, which checks the data arrived;
- a conversation started from the snapshot.

Baseline: a new conversation's first ``runCommand("true")`` (a sandbox made from its
catalog image, no pool), what a fork replaces. Target: a fork within 10 s, which
copying 1.5 GiB allows on a plain disk; copy on write (XFS, btrfs) makes the disk copy
nearly free, but this host's ext4 copies every written block.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from typing import Any

from bench.common import Bench, median, run_alone, timed
from bench.measures import Figure
from tests.helpers import ServiceProcess

WORKSPACE_MB, PACKAGES_MB = 1024, 512
LOAD = (
    f"head -c {WORKSPACE_MB}M /dev/urandom > /mnt/work/data.bin && mkdir -p /opt/pkgs"
    f" && head -c {PACKAGES_MB}M /dev/urandom > /opt/pkgs/blob.bin && sync"
)
CHECK = "stat -c %s /mnt/work/data.bin /opt/pkgs/blob.bin"
EXPECTED = f"{WORKSPACE_MB * 2**20}\n{PACKAGES_MB * 2**20}\n"
TARGET_SECONDS = 10.0
MB = 2**20


def measure(bench: Bench, service: ServiceProcess, forks: int) -> list[Figure]:
    made: list[str] = []
    try:
        return _measure(bench, service, forks, made)
    finally:  # 1.5 GiB a sandbox: the suite's later steps want the disk back
        for conversation in made:
            service.client.delete(f"/v1/conversations/{conversation}", headers=bench.headers())


def _measure(bench: Bench, service: ServiceProcess, forks: int, made: list[str]) -> list[Figure]:
    source = f"fork-src-{uuid.uuid4().hex[:6]}"
    made.append(source)
    run(bench, service, source, LOAD, timeout=600)
    made.append(f"fresh-{uuid.uuid4().hex[:6]}")
    fresh = [timed(lambda: run(bench, service, made[-1], "true"))]

    started = time.perf_counter()
    snapshot = post(bench, service, f"/v1/conversations/{source}/snapshots", {})
    snapshot_ms = (time.perf_counter() - started) * 1000
    apparent, allocated = _du(bench, snapshot["snapshotId"])

    fork_ms, first_ms, parts = [], [], []
    for _ in range(forks):
        fork = f"fork-{uuid.uuid4().hex[:6]}"
        made.append(fork)
        started = time.perf_counter()
        answer = post(bench, service, f"/v1/conversations/{source}/fork", {"conversationId": fork})
        fork_ms.append((time.perf_counter() - started) * 1000)
        parts.append((answer["snapshotSeconds"], answer["startSeconds"]))
        first_ms.append(timed(lambda f=fork: _check(bench, service, f)))  # type: ignore[misc]
    started_from = f"from-snap-{uuid.uuid4().hex[:6]}"
    made.append(started_from)
    start_ms = timed(
        lambda: post(
            bench,
            service,
            f"/v1/snapshots/{snapshot['snapshotId']}/conversations",
            {"conversationId": started_from},
        )
    )
    _check(bench, service, started_from)
    service.client.delete(f"/v1/snapshots/{snapshot['snapshotId']}", headers=bench.headers())
    baseline = median(fresh)
    fork_p50 = median(fork_ms)
    copy, start = median([p[0] for p in parts]), median([p[1] for p in parts])
    return [
        Figure(
            "fork of a sandbox (1 GiB workspace + 512 MiB installed), p50",
            fork_p50,
            "ms",
            "a new conversation's first runCommand(true)",
            baseline,
            f"≤ {TARGET_SECONDS:g} s",
            fork_p50 <= TARGET_SECONDS * 1000,
            f"snapshot part {copy * 1000:.0f} ms, start part {start * 1000:.0f} ms; the fork's "
            f"first runCommand {median(first_ms):.0f} ms; n {forks}",
        ),
        Figure(
            "snapshot of that sandbox",
            snapshot_ms,
            "ms",
            note=f"then a conversation started from it in {start_ms:.0f} ms",
        ),
        Figure(
            "snapshot size on the host: workspace copy allocated (apparent)",
            allocated / MB,
            "MiB",
            note=f"apparent {apparent / MB:.0f} MiB (the workspace's size: a sparse copy); "
            f"the service's answer: {snapshot['workspaceAllocatedBytes'] / MB:.0f} MiB",
        ),
        Figure("snapshot size: committed image layer", snapshot["imageBytes"] / MB, "MiB"),
    ]


def run(
    bench: Bench, service: ServiceProcess, conversation: str, command: str, timeout: int = 60
) -> dict[str, Any]:
    body = {"command": command, "timeoutSeconds": timeout}
    result = bench.call(service.client, conversation, "runCommand", body)
    if result.get("exitCode") != 0:
        msg = f"{command!r} failed: {result}"
        raise RuntimeError(msg)
    return result


def post(bench: Bench, service: ServiceProcess, path: str, body: dict[str, Any]) -> Any:
    response = service.client.post(path, json=body, headers=bench.headers(), timeout=300)
    if response.status_code != 201:
        msg = f"{path}: {response.status_code} {response.text[:300]}"
        raise RuntimeError(msg)
    return response.json()


def _check(bench: Bench, service: ServiceProcess, conversation: str) -> None:
    stdout = run(bench, service, conversation, CHECK)["stdout"]
    if stdout != EXPECTED:
        msg = f"{conversation} lacks the source's data: {stdout!r}"
        raise RuntimeError(msg)


def _du(bench: Bench, snapshot_id: str) -> tuple[int, int]:
    """Apparent and allocated bytes of the snapshot's workspace copy, as ``du`` says."""
    (copy,) = bench.disk_root.glob(f"*/snapshots/{snapshot_id}.img")
    sizes = []
    for flags in (["--apparent-size", "-B1"], ["-B1"]):
        done = subprocess.run(["du", *flags, str(copy)], capture_output=True, text=True, check=True)
        sizes.append(int(done.stdout.split()[0]))
    return sizes[0], sizes[1]


def main() -> None:
    run_alone(
        __doc__.splitlines()[0],
        "one fork instead of three",
        lambda bench, service, quick: measure(bench, service, 1 if quick else 3),
        SIESTA_POOL__ENABLED="false",
    )


if __name__ == "__main__":
    main()
