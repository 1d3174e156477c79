"""Waiting for a worker: a pool still starting its workers makes a script wait for
them (a loaded host is slow, not unavailable); a pool whose workers are all busy,
with none being started, answers ``js_unavailable`` at the acquire limit."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from runtime.core.errors import JsUnavailable
from runtime.jsexec.pool import ScriptOutcome, WorkerPool
from runtime.jsexec.settings import JsSettings
from tests.helpers import wait_until

pytestmark = pytest.mark.slow

ACQUIRE_SECONDS = 0.5


def no_helpers(*_: Any) -> None:
    raise AssertionError


def test_a_script_waits_for_the_first_worker_of_a_new_pool_past_the_acquire_limit() -> None:
    # no worker can be forked and ready in a millisecond: the script is only run
    # because the start under way is waited for
    pool = WorkerPool(JsSettings(pool_size=1, acquire_timeout_seconds=0.001))
    try:
        outcome = pool.run("6 * 7", no_helpers, lambda _: None, 10)
    finally:
        pool.close()
    assert outcome.error is None
    assert outcome.result == "42"


def test_a_script_finds_no_worker_while_all_are_busy_and_none_is_starting() -> None:
    pool = WorkerPool(JsSettings(pool_size=1, acquire_timeout_seconds=ACQUIRE_SECONDS))
    try:
        assert wait_until(lambda: pool.ready_workers == 1, timeout=60)
        outcomes: list[ScriptOutcome] = []
        spinning = threading.Thread(
            target=lambda: outcomes.append(pool.run("for (;;) {}", no_helpers, lambda _: None, 4))
        )
        spinning.start()
        assert wait_until(lambda: pool.ready_workers == 0)  # the spin took the only one
        began = time.monotonic()
        with pytest.raises(JsUnavailable) as raised:
            pool.run("1", no_helpers, lambda _: None, 4)
        waited = time.monotonic() - began
        spinning.join()
    finally:
        pool.close()
    assert raised.value.code == "js_unavailable"
    assert f"within {ACQUIRE_SECONDS:g} seconds" in str(raised.value)
    assert ACQUIRE_SECONDS <= waited < 3  # the acquire limit, not the spin's 4 s
    assert outcomes[0].error is not None
