"""Snapshots and forks of a loaded sandbox (issues 25 and 41).

    python -m bench.forks [--quick]      (and a step of ``python -m bench.suite``)

One sandbox with 1 GiB of random data in its workspace (``/mnt/work``) and 512 MiB
"installed" outside it (``/opt``, its writable layer), both from ``/dev/urandom`` so
nothing compresses or deduplicates. Then, over ``/v1``:

- a snapshot: the time of ``POST .../snapshots`` (p50 of 3, or 1 with ``--quick``),
  beside the same run's ``cp --reflink=always`` of the workspace's disk image (what a
  clone costs the file system) and a byte copy of it (``--reflink=never``: what a
  snapshot cost before, on ext4);
- forks: ``POST .../fork`` then the fork's first ``runCommand`` (which checks the data
  arrived), p50 of 3 (1 with ``--quick``);
- 10 forks of the source asked at once (5 with ``--quick``), until every one answered
  its first ``runCommand``; then as many in one ``POST .../forks`` (one snapshot);
- the host disk a fork takes at once: the disk folder's file system's used blocks
  before and after (``statvfs``), as a share of the source's 1.5 GiB;
- a conversation started from the snapshot.

Baseline for a fork: a new conversation's first ``runCommand("true")`` (a sandbox
made from its catalog image, no pool). Targets (issue 41): snapshot ≤ 300 ms, fork to
its first command ≤ 500 ms, 10 forks ≤ 3 s, a fork's disk ≤ 1 % of its source's.
Memory snapshots are not built (``keepMemory`` is refused): their row says why.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
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
SNAPSHOT_TARGET_MS = 300.0
FORK_TARGET_MS = 500.0
MANY_TARGET_S = 3.0
DISK_TARGET = 0.01
MB = 2**20


def measure(bench: Bench, service: ServiceProcess, repeats: int, many: int) -> list[Figure]:
    made: list[str] = []
    try:
        return _measure(bench, service, repeats, many, made)
    finally:  # 1.5 GiB a sandbox: the suite's later steps want the disk back
        for conversation in made:
            service.client.delete(f"/v1/conversations/{conversation}", headers=bench.headers())


def _measure(
    bench: Bench, service: ServiceProcess, repeats: int, many: int, made: list[str]
) -> list[Figure]:
    source = f"fork-src-{uuid.uuid4().hex[:6]}"
    made.append(source)
    run(bench, service, source, LOAD, timeout=600)
    made.append(f"fresh-{uuid.uuid4().hex[:6]}")
    fresh = [timed(lambda: run(bench, service, made[-1], "true"))]
    reflink_ms, byte_copy_ms = _file_copies(bench, source)

    snapshot_ms, snapshots = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        snapshots.append(post(bench, service, f"/v1/conversations/{source}/snapshots", {}))
        snapshot_ms.append((time.perf_counter() - started) * 1000)
    snapshot = snapshots[0]

    fork_ms, parts, used = [], [], []
    for _ in range(repeats):
        fork = f"fork-{uuid.uuid4().hex[:6]}"
        made.append(fork)
        before = _used_bytes(bench)
        started = time.perf_counter()
        answer = post(bench, service, f"/v1/conversations/{source}/fork", {"conversationId": fork})
        used.append(_used_bytes(bench) - before)
        _check(bench, service, fork)
        fork_ms.append((time.perf_counter() - started) * 1000)
        parts.append((answer["snapshotSeconds"], answer["startSeconds"]))

    many_s = _many_forks(bench, service, source, many, made)
    one_call_s = _forks_in_one_call(bench, service, source, many, made)
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
    for taken in snapshots:
        service.client.delete(f"/v1/snapshots/{taken['snapshotId']}", headers=bench.headers())
    baseline = median(fresh)
    snapshot_p50, fork_p50 = median(snapshot_ms), median(fork_ms)
    copy, start = median([p[0] for p in parts]), median([p[1] for p in parts])
    share = max(used) / ((WORKSPACE_MB + PACKAGES_MB) * MB)
    how = "clones" if snapshot.get("copyOnWrite") else "byte copies"
    return [
        Figure(
            "snapshot (1 GiB workspace + 512 MiB installed), p50",
            snapshot_p50,
            "ms",
            "cp --reflink=always of the workspace image",
            reflink_ms,
            f"≤ {SNAPSHOT_TARGET_MS:g} ms",
            snapshot_p50 <= SNAPSHOT_TARGET_MS,
            f"{how}; a byte copy of the workspace image (cp --reflink=never, what it was "
            f"on ext4) {byte_copy_ms:.0f} ms; n {repeats}",
        ),
        Figure(
            "fork of a running sandbox to its first runCommand, p50",
            fork_p50,
            "ms",
            "a new conversation's first runCommand(true)",
            baseline,
            f"≤ {FORK_TARGET_MS:g} ms",
            fork_p50 <= FORK_TARGET_MS,
            f"snapshot part {copy * 1000:.0f} ms, start part {start * 1000:.0f} ms; n {repeats}",
        ),
        Figure(
            f"{many} forks of one source asked at once, all answering",
            many_s * 1000,
            "ms",
            target=f"≤ {MANY_TARGET_S:g} s (10 forks)",
            met=many_s <= MANY_TARGET_S if many >= 10 else None,
            note="each fork its own snapshot of the source (the source's lease serialises "
            "them); starts run side by side",
        ),
        Figure(
            f"{many} forks of one source in one call (one freeze), all answering",
            one_call_s * 1000,
            "ms",
            f"{many} fork calls at once (the row above)",
            many_s * 1000,
            target=f"≤ {MANY_TARGET_S:g} s (10 forks)",
            met=one_call_s <= MANY_TARGET_S if many >= 10 else None,
            note="POST .../forks: one snapshot, the forks' starts side by side "
            "(as many at once as the provisioning turns allow)",
        ),
        Figure(
            "host disk a fork takes at once, share of its source's 1.5 GiB",
            share * 100,
            "%",
            target=f"≤ {DISK_TARGET * 100:g} %",
            met=share <= DISK_TARGET,
            note=f"the disk folder's used blocks before and after (statvfs), "
            f"{max(used) / MB:.1f} MiB at most; blocks are shared until either side writes",
        ),
        Figure(
            "a conversation started from the snapshot",
            start_ms,
            "ms",
            note="its sandbox made around clones of the snapshot's disks",
        ),
        Figure(
            "memory snapshot (a Python server with 200 MB resident), restored and answering",
            0,
            "ms",
            target="≤ 1.5 s",
            met=False,
            note="not built: keepMemory is refused (snapshot_memory_not_supported). Tried "
            "here (2026-12-06): Debian 12's CRIU 3.17 cannot dump on this kernel; CRIU 4.2 "
            "built from source dumps and restores a 200 MB process in 0.25 s, but through "
            "the engine a checkpoint and a restore take 5-9 s each, and a restore into a "
            "user-namespaced container (ours) fails",
        ),
    ]


def _file_copies(bench: Bench, source: str) -> tuple[float, float]:
    """Milliseconds of ``cp --reflink=always`` and of a byte copy of the source's
    workspace image (the same file a snapshot clones), in the disk folder."""
    images = [
        p for p in bench.disk_root.glob("*/siesta-*.img") if not p.name.endswith(".layer.img")
    ]
    image = max(images, key=lambda p: p.stat().st_blocks)  # the loaded workspace
    times = []
    for flags in (["--reflink=always"], ["--reflink=never", "--sparse=always"]):
        target = image.with_name(f".bench-{uuid.uuid4().hex}")
        started = time.perf_counter()
        copy = ["cp", *flags, str(image), str(target)]
        subprocess.run(copy, check=True)
        times.append((time.perf_counter() - started) * 1000)
        target.unlink()
    return times[0], times[1]


def _used_bytes(bench: Bench) -> int:
    os.sync()
    stat = os.statvfs(bench.disk_root)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


def _many_forks(
    bench: Bench, service: ServiceProcess, source: str, count: int, made: list[str]
) -> float:
    forks = [f"many-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    made.extend(forks)

    def fork_and_check(fork: str) -> None:
        post(bench, service, f"/v1/conversations/{source}/fork", {"conversationId": fork})
        _check(bench, service, fork)

    started = time.perf_counter()
    _each_at_once(fork_and_check, forks)
    return time.perf_counter() - started


def _forks_in_one_call(
    bench: Bench, service: ServiceProcess, source: str, count: int, made: list[str]
) -> float:
    forks = [f"call-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    made.extend(forks)
    started = time.perf_counter()
    answer = post(bench, service, f"/v1/conversations/{source}/forks", {"conversationIds": forks})
    refused = [f for f in answer["forks"] if f["error"] is not None]
    if refused:
        msg = f"forks refused: {refused}"
        raise RuntimeError(msg)
    _each_at_once(lambda fork: _check(bench, service, fork), forks)
    return time.perf_counter() - started


def _each_at_once(work: Callable[[str], None], items: list[str]) -> None:
    """``work`` on every item, each on a thread of its own; the first failure raised."""
    failures: list[BaseException] = []

    def run_one(item: str) -> None:
        try:
            work(item)
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=run_one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


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


def sizes(quick: bool) -> tuple[int, int]:
    """(snapshots and forks timed one by one, forks asked at once)."""
    return (1, 5) if quick else (3, 10)


def main() -> None:
    run_alone(
        __doc__.splitlines()[0],
        "one snapshot and fork instead of three, five forks at once instead of ten",
        lambda bench, service, quick: measure(
            bench, service, 1 if quick else 3, 5 if quick else 10
        ),
        SIESTA_POOL__ENABLED="false",
    )


if __name__ == "__main__":
    main()
