"""The pool's size from arrivals: the busiest surge, the floor, the ceiling, the total."""

from __future__ import annotations

from runtime.sessions.demand import busiest_surge, share_out, target
from runtime.sessions.settings import PoolSettings

SETTINGS = PoolSettings(min_per_image=2, max_per_image=20, surge_seconds=10, headroom=1.5)


def test_the_busiest_surge_is_the_most_arrivals_within_any_span() -> None:
    # A burst of 5 within 2 s, then a trickle one every 20 s.
    arrivals = [100.0, 100.5, 101.0, 101.5, 102.0, 130.0, 150.0, 170.0]
    assert busiest_surge(arrivals, 10) == 5
    assert busiest_surge(arrivals, 60) == 7  # 100..150 (170 is 70 s after 100)
    assert busiest_surge([], 10) == 0
    assert busiest_surge([3.0, 1.0, 2.0], 1.5) == 2  # order of noting does not matter


def test_an_arrival_exactly_a_span_later_starts_a_new_surge() -> None:
    assert busiest_surge([0.0, 10.0, 20.0], 10) == 1


def test_the_target_is_the_surge_with_headroom_between_floor_and_ceiling() -> None:
    assert target([], SETTINGS) == 2  # quiet: the floor
    assert target([1.0], SETTINGS) == 2  # ceil(1.5) = 2
    assert target([float(i) for i in range(4)], SETTINGS) == 6
    assert target([i / 10 for i in range(50)], SETTINGS) == 20  # the ceiling


def test_targets_are_cut_down_in_proportion_to_the_total() -> None:
    assert share_out({"a": 2, "b": 2}, 10) == {"a": 2, "b": 2}
    assert share_out({"a": 30, "b": 10}, 8) == {"a": 6, "b": 2}
    shared = share_out({"a": 2, "b": 2}, 3)
    assert sum(shared.values()) == 3 and sorted(shared.values()) == [1, 2]
    assert share_out({"a": 0, "b": 4}, 2) == {"a": 0, "b": 2}
