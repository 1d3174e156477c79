"""What one door costs per call, in this process on SQLite: a token identified, its org
and user bound, and a programmatic call's policy check and log entry
(``ToolExecutor.through_door``), beside the path ``runCommand`` has always taken
(``ToolExecutor.run_direct`` of a function that does nothing).

    python -m bench.door          (also a part of ``make bench``)
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measures import Figure
from runtime.core.auth import TokenRegistry, token_digest
from runtime.core.context import CallContext
from runtime.core.settings import TokenSettings
from runtime.functions.sandbox import SANDBOX
from runtime.store.sqlite import open_sqlite
from runtime.tools.door import door_call
from runtime.tools.executor import ToolExecutor

SAMPLES = 2000
TOKENS = 20
"""Configured tokens: ``identify`` compares the presented one with each."""


def _us(run: Callable[[], object], n: int = SAMPLES) -> float:
    """The median time of ``run``, in microseconds."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def measure() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="siesta-bench-door-") as tmp:
        stores = open_sqlite(Path(tmp) / "siesta.db")
        try:
            return _measure(stores.executions)
        finally:
            stores.close()


def _measure(log: Any) -> list[Figure]:
    presented = "bench-token-" + uuid.uuid4().hex
    settings = [
        TokenSettings(
            name=f"t{i}",
            sha256=token_digest(presented if i == TOKENS - 1 else f"other-{i}-{uuid.uuid4()}"),
            scopes=["sandbox", "shell"],
            org="org-bench" if i == TOKENS - 1 else None,
        )
        for i in range(TOKENS)
    ]
    tokens = TokenRegistry.from_settings(settings, None)

    def no_catalog(*_: Any) -> Any:
        msg = "no registered agent in this bench"
        raise AssertionError(msg)

    run_command = next(spec for spec in SANDBOX if spec.name == "runCommand")
    executor = ToolExecutor(no_catalog, {"runCommand": lambda call, args: {}}, log)
    caller = tokens.identify(presented)
    assert caller is not None
    ctx = CallContext(org=caller.org_for(None), user="u1", conversation="bench-door")
    call = door_call("startProcess", {"command": "true", "cwd": "/mnt/work"})

    def through_door() -> None:
        with executor.through_door(ctx, call, caller.name):
            pass

    identify = _us(lambda: tokens.identify(presented))
    bind = _us(
        lambda: CallContext(
            org=caller.org_for("org-bench"), user=caller.user_for("u1") or "", conversation="c"
        )
    )
    direct = _us(lambda: executor.run_direct(ctx, run_command, "sandbox", {}, caller.name))
    door = _us(through_door)
    return [
        Figure(f"identify a token among {TOKENS}, p50", identify, "µs"),
        Figure("bind org and user, build the context, p50", bind, "µs"),
        Figure(
            "a programmatic call at the door (policy + log), p50",
            door,
            "µs",
            "run_direct of a no-op runCommand",
            direct,
            "within 1.5x of run_direct",
            door <= 1.5 * direct,
        ),
    ]


def main() -> int:
    for figure in measure():
        baseline = (
            f"  vs {figure.baseline_name} {figure.baseline:.1f} {figure.unit}"
            f" (x{figure.ours / figure.baseline:.2f})"
            if figure.baseline
            else ""
        )
        print(f"{figure.name}: {figure.ours:.1f} {figure.unit}{baseline}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
