"""A process reached through another instance than the one that started it (issue 40).

    python -m bench.attach [--quick]      (and a step of ``python -m bench.suite``)

Two service instances on one Redis and one engine. One E2B sandbox; a ``cat`` started
in it (background, stdin) through instance A. Then, alternately through A (the
baseline: the instance that started it) and through B (which never saw it start):

- **attach**: ``commands.connect(pid)`` until its stream has started (B asks the
  sandbox's agent for its table and follows the process through its own channel);
- **stdin round trip**: on that stream, ``send_stdin`` of a line until the line comes
  back.

Target: B's p50 at most 1.3x A's, for each. Both go through the same agent; B adds a
table lookup (one round trip to the agent) on its first call and follows the output
through a channel of its own instead of the one that started the process.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

import docker
from e2b import Sandbox

from bench.common import Bench, median
from bench.measures import Figure
from tests.helpers import ServiceProcess
from tests.redis_server import RedisServer

TARGET = 1.3
WARM_UP = 3


def measure(bench: Bench, n: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="siesta-bench-attach-") as tmp:
        redis = RedisServer(Path(tmp) / "redis")
        redis.start()
        instances: list[ServiceProcess] = []
        try:
            for name in ("a", "b"):
                folder = Path(tmp) / name
                folder.mkdir()
                instances.append(bench.start(folder, SIESTA_STORE__URL=redis.url))
            return _measure(bench, instances[0], instances[1], n)
        finally:
            for instance in instances:
                instance.stop()
            redis.stop()


def _sandbox(bench: Bench, service: ServiceProcess, sandbox_id: str | None = None) -> Sandbox:
    api_url, sandbox_url = f"{service.base_url}/e2b", f"{service.base_url}/e2b/envd"
    if sandbox_id is None:
        return Sandbox.create("base", api_key=bench.token, api_url=api_url, sandbox_url=sandbox_url)
    return Sandbox.connect(
        sandbox_id, api_key=bench.token, api_url=api_url, sandbox_url=sandbox_url
    )


def _measure(bench: Bench, a: ServiceProcess, b: ServiceProcess, n: int) -> list[Figure]:
    through_a = _sandbox(bench, a)
    try:
        through_b = _sandbox(bench, b, through_a.sandbox_id)
        cat = through_a.commands.run("cat", background=True, stdin=True, timeout=0)
        times: dict[str, dict[str, list[float]]] = {
            "A": {"attach": [], "round trip": []},
            "B": {"attach": [], "round trip": []},
        }
        for i in range(WARM_UP + n):
            for name, sandbox in (("A", through_a), ("B", through_b)):
                attach, trip = _attach_and_echo(sandbox, cat.pid)
                if i >= WARM_UP:
                    times[name]["attach"].append(attach)
                    times[name]["round trip"].append(trip)
        through_a.commands.kill(cat.pid)
    finally:
        through_a.kill()
    figures = []
    for what in ("attach", "round trip"):
        ours, baseline = median(times["B"][what]), median(times["A"][what])
        figures.append(
            Figure(
                f"process {what} through another instance, p50",
                ours,
                "ms",
                "the instance that started it",
                baseline,
                f"<= {TARGET}x",
                ours <= TARGET * baseline,
            )
        )
    return figures


def _attach_and_echo(sandbox: Sandbox, pid: int) -> tuple[float, float]:
    """(ms until the connected stream started, ms for a line typed to come back)."""
    started = time.perf_counter()
    handle = sandbox.commands.connect(pid, timeout=30)
    attached = time.perf_counter()
    line = uuid.uuid4().hex
    try:
        sandbox.commands.send_stdin(pid, line + "\n")
        seen = ""
        for stdout, _, _ in handle:
            seen += stdout or ""
            if line in seen:
                break
        echoed = time.perf_counter()
    finally:
        handle.disconnect()
    return (attached - started) * 1000, (echoed - attached) * 1000


if __name__ == "__main__":
    import argparse

    from bench.suite import render

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 samples each, not 50")
    quick = parser.parse_args().quick
    bench = Bench()
    client = docker.from_env()
    try:
        print(render(measure(bench, 10 if quick else 50)))
    finally:
        bench.remove_everything(client)
        client.close()
