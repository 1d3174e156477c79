"""Every benchmark, one table: each figure beside its baseline, each target met or not.

    python -m bench.suite [--quick]      (``make bench``)

Starts a real service (Docker provider, SQLite, warm pool on), a plain container
of the same image for the Docker baselines, and measures in turn: warm
runCommand, throughput, first operations with the pool warm, resume, files,
listFiles, JavaScript, idle density, a fork and a snapshot of a sandbox holding 1.5 GiB
(``bench/forks.py``), and the E2B SDK's ``commands.run("true")``
and ``files.read`` beside ``/v1``'s on the same sandbox (``bench/e2b.py``); then,
on services of their own, a new conversation's first call under arrival patterns
(``bench/arrivals.py``) and a process reached through another instance than the one
that started it (``bench/attach.py``); last, in this process, ``search_memory``'s recall on
paraphrased questions beside keyword matching (``bench/memory_recall.py``), what the
one door costs a call (``bench/door.py``) and what substituting a secret costs an HTTPS
request through the egress proxy (``bench/egress_secrets.py``). Prints the
table and writes ``bench/results.md`` with the machine, the date and the commit.
Everything it makes carries ``siesta.bench=<run id>`` and is removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker

from bench import (
    arrivals,
    attach,
    door,
    e2b,
    egress_secrets,
    forks,
    jail,
    knowledge,
    measures,
    memory_recall,
    ports,
)
from bench.common import IMAGE_REF, Bench
from bench.measures import Figure

RESULTS = Path(__file__).parent / "results.md"
POOL_SIZE = 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    n = 20 if args.quick else 100
    bench = Bench()
    client = docker.from_env()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="siesta-bench-") as tmp:
        service = bench.start(
            Path(tmp),
            SIESTA_POOL__ENABLED="true",
            SIESTA_POOL__MIN_PER_IMAGE=str(POOL_SIZE),
            SIESTA_POOL__MAX_PER_IMAGE=str(POOL_SIZE),  # first_operation waits for a full pool
            SIESTA_CAPACITY__MAX_ACTIVE_PER_USER="200",
            SIESTA_CAPACITY__MAX_ACTIVE_PER_ORG="200",
            SIESTA_CAPACITY__MAX_ACTIVE_PER_HOST="200",
            SIESTA_FILES__MAX_WRITE_BYTES=str(2 * 1024 * 1024),
            SIESTA_HTTP__MAX_REQUEST_BYTES=str(4 * 1024 * 1024),
            SIESTA_JS__POOL_SIZE="4",
        )
        baseline = str(
            client.containers.run(
                IMAGE_REF, detach=True, network_mode="none", labels={"siesta.bench": bench.run_id}
            ).name
        )
        steps: list[tuple[str, Callable[[], list[Figure]]]] = [
            ("warm runCommand", lambda: measures.warm_command(bench, service, baseline, n * 2)),
            (
                "first operations",
                lambda: measures.first_operation(bench, service, max(10, n // 5), POOL_SIZE),
            ),
            ("files", lambda: measures.files(bench, service, baseline, max(10, n // 5))),
            ("JavaScript", lambda: measures.javascript(bench, service, n)),
            (
                "throughput",
                lambda: measures.throughput(bench, service, baseline, 5.0 if args.quick else 15.0),
            ),
            ("resume", lambda: measures.resume(bench, client, max(5, n // 10))),
            (
                "idle density",
                lambda: measures.idle_density(bench, service, client, 10 if args.quick else 30),
            ),
            ("ports", lambda: ports.measure(bench, service, n)),
            ("forks", lambda: forks.measure(bench, service, *forks.sizes(args.quick))),
            # Last on this service: its sandbox is another image (E2B's "base").
            ("E2B beside /v1", lambda: e2b.measure(bench, service, n)),
        ]
        try:
            for name, step in steps:
                print(f"measuring: {name} ...", flush=True)
                figures += step()
        finally:
            service.stop()
            bench.remove_everything(client)
    try:
        # Last, on services of their own: this service's pool must not compete.
        figures += arrivals.run(bench, client, quick=args.quick)
        print("measuring: a process through another instance ...", flush=True)
        figures += attach.measure(bench, 10 if args.quick else 50)
    finally:
        client.close()
    print("measuring: memory search recall ...", flush=True)
    figures += memory_recall.measure()  # in this process, no service: the bank code itself
    print("measuring: knowledge bases ...", flush=True)
    figures += knowledge.measure(quick=args.quick)  # in this process: recall, scale, indexing
    figures += door.measure()  # in this process: what the one door adds to a call
    figures += egress_secrets.measure(50 if args.quick else 200)  # in this process: secrets
    print("measuring: the JS jail ...", flush=True)
    figures += jail.measure(20 if args.quick else 100)  # in this process: jailed vs not
    table = render(figures)
    print(table)
    RESULTS.write_text(report(table, quick=args.quick))
    print(f"\nwritten to {RESULTS}")
    return 0


def render(figures: list[Figure]) -> str:
    rows = [
        "| measure | ours | baseline | target | |",
        "|---|---:|---|---|---|",
    ]
    for f in figures:
        base = (
            f"{_number(f.baseline)} {f.unit} ({f.baseline_name})" if f.baseline is not None else "—"
        )
        verdict = {True: "met", False: "**missed**", None: ""}[f.met]
        note = f" — {f.note}" if f.note else ""
        rows.append(
            f"| {f.name} | {_number(f.ours)} {f.unit}{note} | {base} | {f.target} | {verdict} |"
        )
    return "\n".join(rows)


def _number(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.3f}"


def report(table: str, *, quick: bool) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    docker_version = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    machine = (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} cores, "
        f"{memory_gb:.0f} GB, Docker {docker_version}, Python {platform.python_version()}"
    )
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "# Benchmark results\n\n"
        f"`python -m bench.suite{' --quick' if quick else ''}` (`make bench`), {when}, "
        f"commit {commit}.\n\nMachine: {machine}.\n\n{table}\n\n"
        "Each baseline was measured in the same run, on the same machine. See "
        "`bench/README.md` for what each measure includes.\n"
    )


if __name__ == "__main__":
    sys.exit(main())
