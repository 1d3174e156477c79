"""E2B's protocol beside ``/v1`` on one sandbox (issue 24).

    python -m bench.e2b [--quick]      (and a step of ``python -m bench.suite``)

One sandbox made with the stock ``e2b`` SDK (sync client, template ``base``) on
the service's ``/e2b`` and ``/e2b/envd``. It is a conversation of the token's
org, so ``/v1/conversations/<sandbox id>/sandbox/...`` reaches the same
container: each E2B call is timed beside the ``/v1`` call that does the same
thing there, alternately, after a few untimed calls of each:

- ``commands.run("true")`` beside ``runCommand`` of ``true``;
- ``files.read`` of a 1 KiB file beside ``readFile`` of it;
- ``files.read(format="bytes")`` of a 1 MiB file beside ``readFile`` of it (when
  ``/v1`` returns it whole: ``SIESTA_FILES__MAX_READ_BYTES``).

Target, for each p50 and p95: at most 2x the ``/v1`` call's. Both paths end in
the same sandbox under the same lease; E2B adds its envd dispatch (the sandbox
record and its access token), Connect framing, a ``setpriv`` to run as the
sandbox's user and, for files, a ``cat`` process where ``/v1`` asks ``siesta-fs``.
None of that should cost more than the round trip itself: over 2x, the protocol
layer (or the SDK's use of it) costs more than the call it wraps. An E2B call that
fails is left out of the timings and named in the row, which then misses its target.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from math import nan
from typing import Any

import httpx
from e2b import Sandbox, SandboxException

from bench.common import Bench, median, percentile, run_alone, timed
from bench.measures import Figure
from tests.helpers import ServiceProcess

TEMPLATE = "base"
"""The E2B SDK's default template: the catalog image with a user ``user``."""
ORG = "default"
"""The org of a token bound to none (``SIESTA_E2B__DEFAULT_ORG``): the sandbox's."""
TARGET = 2.0
"""E2B's p50 and p95 against ``/v1``'s on the same sandbox (see the docstring)."""
WARM_UP = 5
SMALL, BIG = 1024, 1024 * 1024
SMALL_FILE, BIG_FILE = "bench-1k.txt", "bench-1m.txt"
"""In ``/mnt/work``: ``/v1`` paths are relative to it; E2B's are absolute."""


def measure(bench: Bench, service: ServiceProcess, n: int) -> list[Figure]:
    sandbox = Sandbox.create(
        TEMPLATE,
        api_key=bench.token,
        api_url=f"{service.base_url}/e2b",
        sandbox_url=f"{service.base_url}/e2b/envd",
    )
    try:
        return _pairs(bench, service.client, sandbox, n)
    finally:
        sandbox.kill()


def _pairs(bench: Bench, client: httpx.Client, sandbox: Sandbox, n: int) -> list[Figure]:
    def v1(function: str, body: dict[str, Any]) -> dict[str, Any]:
        response = client.post(
            f"/v1/conversations/{sandbox.sandbox_id}/sandbox/{function}",
            json=body,
            headers={
                "Authorization": f"Bearer {bench.token}",
                "X-Siesta-Org": ORG,
                "X-Siesta-User": "bench",
            },
        )
        if response.status_code != 200:
            msg = f"/v1 {function} failed: {response.status_code} {response.text[:300]}"
            raise RuntimeError(msg)
        result: dict[str, Any] = response.json()
        return result

    made = " && ".join(
        f"head -c {size} /dev/zero | tr '\\0' x > /mnt/work/{name}"
        for name, size in ((SMALL_FILE, SMALL), (BIG_FILE, BIG))
    )
    v1("runCommand", {"command": f"{made} && chmod 644 /mnt/work/bench-*.txt"})

    def e2b_true() -> None:
        sandbox.commands.run("true")  # raises unless it exits 0

    def v1_true() -> None:
        assert v1("runCommand", {"command": "true"})["exitCode"] == 0

    def e2b_small() -> None:
        assert len(sandbox.files.read(f"/mnt/work/{SMALL_FILE}")) == SMALL

    def v1_small() -> None:
        assert len(v1("readFile", {"path": SMALL_FILE})["content"]) == SMALL

    def e2b_big() -> None:
        assert len(sandbox.files.read(f"/mnt/work/{BIG_FILE}", format="bytes")) == BIG

    def v1_big() -> None:
        assert len(v1("readFile", {"path": BIG_FILE})["content"]) == BIG

    figures = _figures(
        'commands.run("true")', "runCommand(true)", *_alternately(e2b_true, v1_true, n)
    )
    figures += _figures("files.read 1 KiB", "readFile 1 KiB", *_alternately(e2b_small, v1_small, n))
    whole = v1("readFile", {"path": BIG_FILE})
    if whole["truncated"]:  # /v1 cannot return it: nothing to compare with
        return figures
    big = _alternately(e2b_big, v1_big, max(10, n // 5))
    return figures + _figures('files.read 1 MiB, format="bytes"', "readFile 1 MiB", *big)


def _alternately(
    ours: Callable[[], None], baseline: Callable[[], None], n: int
) -> tuple[list[float], list[float], list[str]]:
    """``n`` timings of each, taken in turns (each goes first half the time), and why
    any E2B call failed (not timed: a failure is reported, it does not stop the run)."""
    failed: list[str] = []

    def attempt(samples: list[float] | None) -> None:
        started = time.perf_counter()
        try:
            ours()
        except SandboxException as exc:
            failed.append(str(exc)[:240])
            return
        if samples is not None:
            samples.append((time.perf_counter() - started) * 1000)

    for _ in range(WARM_UP):
        attempt(None)
        baseline()
    mine: list[float] = []
    theirs: list[float] = []
    for i in range(n):
        if i % 2:
            attempt(mine)
            theirs.append(timed(baseline))
        else:
            theirs.append(timed(baseline))
            attempt(mine)
    return mine, theirs, failed


def _figures(
    call: str, baseline_call: str, ours: list[float], base: list[float], failed: list[str]
) -> list[Figure]:
    failures = ""
    if failed:
        kinds = "; ".join(f"{error} x{k}" for error, k in Counter(failed).most_common(2))
        failures = f"; {len(failed)} E2B calls failed ({kinds})"
    rows = []
    for name, fraction in (("p50", 0.5), ("p95", 0.95)):
        # NaN when every call failed: the row then shows as missed, not as fast.
        value = (median(ours) if fraction == 0.5 else percentile(ours, fraction)) if ours else nan
        reference = median(base) if fraction == 0.5 else percentile(base, fraction)
        rows.append(
            Figure(
                f"E2B SDK {call}, {name}",
                value,
                "ms",
                f"/v1 {baseline_call}, same sandbox, {name}",
                reference,
                f"≤ {TARGET:g}x /v1 {name}, none failing",
                value <= TARGET * reference and not failed,
                f"x{value / reference:.2f} of /v1; n {len(ours)}{failures}",
            )
        )
    return rows


def main() -> None:
    run_alone(
        __doc__.splitlines()[0],
        "the suite's quick sample count",
        lambda bench, service, quick: measure(bench, service, 20 if quick else 100),
    )


if __name__ == "__main__":
    main()
