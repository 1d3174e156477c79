"""What the JS workers' jail costs: ``1+1`` on jailed workers beside unjailed ones,
in this process (no HTTP), pools of the service's default size, one after the other.

    worker ready    a script given to a pool that had time to refill
    back to back    scripts one after another: each waits for a replacement worker
                    whenever the pool ran dry, so this includes starting a worker

    python -m bench.jail          (also a part of ``make bench``)
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.measures import Figure
from runtime.jsexec.pool import WorkerPool
from runtime.jsexec.settings import JsSettings

SAMPLES = 100
TARGET = 1.5
"""The issue's bound: a jailed figure within 1.5x of the unjailed one."""


def measure(n: int = SAMPLES) -> list[Figure]:
    """Pools of every mode side by side, sampled in turn: a machine that gets busier
    during the run weighs on every mode alike."""
    modes = ("off", "full", "unprivileged")
    pools = {mode: WorkerPool(JsSettings.model_validate({"jail": mode})) for mode in modes}
    samples: dict[str, dict[str, list[float]]] = {m: {"ready": [], "back": []} for m in modes}
    try:
        for pool in pools.values():
            for _ in range(5):  # the template started, the pool full
                _script(pool)
        time.sleep(0.5)
        for _ in range(n):
            for mode, pool in pools.items():
                time.sleep(0.1)  # the pool is full again, its replacements started
                samples[mode]["ready"].append(_script(pool))
        for mode, pool in pools.items():
            samples[mode]["back"] = [_script(pool) for _ in range(n)]
    finally:
        for pool in pools.values():
            pool.close()
    figures: list[Figure] = []
    for mode in ("full", "unprivileged"):
        for what, key in (("worker ready", "ready"), ("back to back", "back")):
            ours = statistics.median(samples[mode][key])
            base = statistics.median(samples["off"][key])
            figures.append(
                Figure(
                    f"JS 1+1 in-process, {what}, jail={mode}, p50",
                    ours,
                    "ms",
                    "jail=off",
                    base,
                    f"within {TARGET}x of jail=off",
                    ours <= TARGET * base,
                    f"x{ours / base:.2f}",
                )
            )
    return figures


def _script(pool: WorkerPool) -> float:
    started = time.perf_counter()
    outcome = pool.run("1+1", _no_helpers, lambda _: None, 10)
    elapsed = (time.perf_counter() - started) * 1000
    assert outcome.result == "2", outcome.error
    return elapsed


def _no_helpers(*_: Any) -> Any:
    msg = "1+1 calls no helper"
    raise AssertionError(msg)


def main() -> int:
    for figure in measure():
        print(f"{figure.name}: {figure.ours:.2f} ms vs {figure.baseline:.2f} ms ({figure.note})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
