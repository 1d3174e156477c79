"""How many ready sandboxes an image needs: sized from the arrivals it has seen.

An arrival is the first operation of a new conversation. The pool must absorb the
busiest surge of arrivals seen lately without a miss, for as long as it takes to
make that many members again (``surge_seconds``); a little more (``headroom``),
since the next surge can be larger. A quiet image keeps its floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from runtime.sessions.settings import PoolSettings


def busiest_surge(arrivals: Sequence[float], surge_seconds: float) -> int:
    """The most arrivals within any span of ``surge_seconds`` (a sliding window)."""
    times = sorted(arrivals)
    busiest, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= surge_seconds:
            start += 1
        busiest = max(busiest, end - start + 1)
    return busiest


def target(arrivals: Sequence[float], settings: PoolSettings) -> int:
    """Ready members the image should have, given its arrivals within the window."""
    wanted = math.ceil(busiest_surge(arrivals, settings.surge_seconds) * settings.headroom)
    return max(settings.min_per_image, min(wanted, settings.max_per_image))


def share_out(targets: dict[str, int], total: int) -> dict[str, int]:
    """The targets cut down to ``total`` in all, each in proportion (at least one
    member for an image that wants any, while the total allows)."""
    wanted = sum(targets.values())
    if wanted <= total:
        return dict(targets)
    shares = {image: (want * total) // wanted for image, want in targets.items()}
    # What rounding down left over goes to the images that want most.
    left = total - sum(shares.values())
    for image in sorted(targets, key=lambda i: -targets[i]):
        if left <= 0:
            break
        if shares[image] < targets[image]:
            shares[image] += 1
            left -= 1
    return shares
