"""Turns at making sandboxes: first come first served, refills only in free turns."""

from __future__ import annotations

import threading
import time

from runtime.sessions.gate import MakeGate


def test_waiting_first_operations_go_in_arrival_order_and_refills_do_not_jump_them() -> None:
    gate = MakeGate(concurrency=1, queue_limit=10)
    order: list[str] = []

    def first_operation(name: str) -> None:
        with gate.turn():
            order.append(name)

    with gate.turn():  # the one turn is taken; three arrive behind it
        threads = []
        for name in ("a", "b", "c"):
            thread = threading.Thread(target=first_operation, args=(name,))
            thread.start()
            threads.append(thread)
            time.sleep(0.05)
        assert gate.try_idle_turn() is False  # a refill waits while anyone does
        assert gate.quiet_for() == 0.0
    for thread in threads:
        thread.join()

    assert order == ["a", "b", "c"]
    assert gate.try_idle_turn() is True  # free and nobody waits
    gate.release()


def test_a_refill_takes_only_a_free_turn() -> None:
    gate = MakeGate(concurrency=2, queue_limit=10)
    assert gate.try_idle_turn() and gate.try_idle_turn()
    assert gate.try_idle_turn() is False  # both turns are refills' now
    gate.release()
    gate.release()
    assert gate.quiet_for() == float("inf")  # no first operation ever came
