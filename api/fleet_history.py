"""The fleet over the last hour or so, for the console's overview chart: one sample per
count of the store (``SIESTA_METRICS__FLEET_REFRESH_SECONDS``), the last
``SIESTA_METRICS__HISTORY_SAMPLES`` kept in memory.

Sandboxes by state are the deployment's (the shared store); pool hits and misses and
the p95 latency are this instance's, over the time since the previous sample, taken
from its own Prometheus counters. Nothing is stored: a restart starts a new history.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections import deque
from dataclasses import dataclass

from anyio import to_thread

from api.request_metrics import REQUEST_SECONDS
from runtime.core import metrics
from runtime.sessions.fleet_gauges import FleetCounts, FleetGauges

log = logging.getLogger(__name__)

QUIET_ROUTES = frozenset({"/metrics", "/healthz", "/readyz"})
"""Left out of the chart's p95: probes and scrapes answer in microseconds, at a steady
rate, and would hide the latency callers see."""


@dataclass(frozen=True)
class FleetSample:
    at: float
    active: int
    paused: int
    pool_hits: int
    pool_misses: int
    p95_seconds: float | None
    """``None``: no request was answered since the previous sample."""


class FleetHistory:
    def __init__(self, size: int) -> None:
        self._samples: deque[FleetSample] = deque(maxlen=size)
        # Pages read it on worker threads while the loop appends: copying a deque that
        # changes underneath raises.
        self._lock = threading.Lock()
        self._claims = _pool_claims()
        self._buckets = _latency_buckets()

    def samples(self) -> list[FleetSample]:
        with self._lock:
            return list(self._samples)

    def record(self, counts: FleetCounts) -> None:
        claims, buckets = _pool_claims(), _latency_buckets()
        since = {le: count - self._buckets.get(le, 0) for le, count in buckets.items()}
        sample = FleetSample(
            at=counts.at,
            active=counts.sessions.get("active", 0),
            paused=counts.sessions.get("paused", 0),
            pool_hits=int(claims.get("hit", 0) - self._claims.get("hit", 0)),
            pool_misses=int(claims.get("miss", 0) - self._claims.get("miss", 0)),
            p95_seconds=quantile(0.95, since),
        )
        with self._lock:
            self._samples.append(sample)
        self._claims, self._buckets = claims, buckets


async def sample_forever(gauges: FleetGauges, history: FleetHistory, interval: float) -> None:
    """Count the fleet now and every ``interval`` seconds after. A count that cannot
    read the store is logged (``FleetGauges.refresh``) and the chart repeats the last
    one: its line stays drawn, ``siesta_store_readable`` says it is stale."""
    while True:
        try:
            counts = await to_thread.run_sync(gauges.refresh)
            if counts is not None:
                history.record(counts)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("counting the fleet failed: %s", error, exc_info=error)
        await asyncio.sleep(interval)


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """``histogram_quantile`` over cumulative bucket counts (``le`` → count): linear
    within the bucket the rank falls in; the highest finite bound if it is ``+Inf``."""
    bounds = sorted(buckets)
    total = buckets.get(math.inf, 0) if bounds else 0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            share = (rank - below) / (count - below) if count > below else 1.0
            return lower + (bound - lower) * share
        lower, below = bound, count
    return lower


def _pool_claims() -> dict[str, float]:
    return {
        sample.labels["outcome"]: sample.value
        for family in metrics.POOL_CLAIMS.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def _latency_buckets() -> dict[float, float]:
    """Cumulative counts by upper bound, summed over every method and route but the
    quiet ones."""
    summed: dict[float, float] = {}
    for family in REQUEST_SECONDS.collect():
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.labels["route"] not in QUIET_ROUTES:
                bound = float(sample.labels["le"])
                summed[bound] = summed.get(bound, 0) + sample.value
    return summed
