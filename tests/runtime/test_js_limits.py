"""A script's limits on real workers forked from the template, as the service runs
them: a spin ends at its timeout, and only a script that allocates reaches the
memory limit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.core.errors import JS_MEMORY_LIMIT, JS_TIMEOUT
from runtime.jsexec.pool import ScriptOutcome, WorkerPool
from runtime.jsexec.settings import JsSettings
from tests.helpers import wait_until

pytestmark = pytest.mark.slow

TIMEOUT = 5.0
MEMORY_MB = 128
"""Low enough that a spin growing the worker's memory (as forked workers did, some
30 MB a second) would reach it well before the timeout."""
MARGIN = 1.5
"""Seconds past the timeout still taken as "at the timeout" on a busy machine."""


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    settings = JsSettings(
        pool_size=1,
        worker_start="fork",
        timeout_seconds=TIMEOUT,
        memory_limit_mb=MEMORY_MB,
    )
    pool = WorkerPool(settings)
    yield pool
    pool.close()


def run(pool: WorkerPool, code: str) -> tuple[ScriptOutcome, float]:
    def no_helpers(*_: Any) -> None:
        raise AssertionError

    # a script's clock starts with its worker: the previous script's replacement is
    # waited for first, so that the time measured here is the script's
    assert wait_until(lambda: pool.ready_workers >= 1, timeout=60)
    started = time.monotonic()
    outcome = pool.run(code, no_helpers, lambda _: None, TIMEOUT)
    return outcome, time.monotonic() - started


@pytest.mark.parametrize(
    "code",
    [
        "while (true) {}",
        "for (;;) { Math.sqrt(Math.random()) }",
        "function spin(n) { return n + 1 } var i = 0; while (true) i = spin(i) % 7",
    ],
)
def test_a_spinning_script_ends_with_js_timeout_at_its_timeout(pool: WorkerPool, code: str) -> None:
    outcome, elapsed = run(pool, code)
    assert outcome.error is not None
    assert outcome.error["code"] == JS_TIMEOUT, outcome.error
    assert outcome.error["limit"] == TIMEOUT
    assert TIMEOUT <= elapsed < TIMEOUT + MARGIN


def test_a_script_that_allocates_without_end_ends_with_js_memory_limit(
    pool: WorkerPool,
) -> None:
    outcome, elapsed = run(pool, "var a = []; while (true) a.push('x'.repeat(1e6) + a.length)")
    assert outcome.error is not None
    assert outcome.error["code"] == JS_MEMORY_LIMIT, outcome.error
    assert outcome.error["limit"] == MEMORY_MB
    assert elapsed < TIMEOUT


def test_the_pool_serves_after_its_workers_were_killed(pool: WorkerPool) -> None:
    outcome, _ = run(pool, "6 * 7")
    assert (outcome.result, outcome.error) == ("42", None)
