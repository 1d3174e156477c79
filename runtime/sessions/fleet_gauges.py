"""The deployment's sandboxes as Prometheus gauges, counted every so often rather
than at every scrape.

Counting reads every session record and pool member in the store: at scrape time
that was one full read per scrape per replica, however often Prometheus asked. Each
instance now counts once per ``SIESTA_METRICS__FLEET_REFRESH_SECONDS`` and a scrape
answers the last count.

The counts are of the store, which a deployment's replicas share: every replica
reports the same deployment-wide numbers, so they are aggregated with ``max`` over a
deployment's instances (``max by (namespace, job, status)``), never ``sum``, which
would count each sandbox once per replica. (No ``deployment`` label: the scrape's own
labels tell deployments apart, and the series keep the names scripts already read.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from runtime.core.errors import SiestaError
from runtime.core.records import SessionStatus
from runtime.sessions.fleet import Fleet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FleetCounts:
    """One count of the store: session records by status, ready pool members by image."""

    at: float
    sessions: dict[str, int] = field(default_factory=dict)
    pool_members: dict[str, int] = field(default_factory=dict)


class FleetGauges(Collector):
    """``siesta_sessions{status}``, ``siesta_pool_members{image}``
    from the last count, and ``siesta_store_readable`` (whether that count could read
    the store: 0 keeps the previous counts, stale)."""

    def __init__(self, fleet: Fleet, clock: Callable[[], float] = time.time) -> None:
        self._fleet = fleet
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: FleetCounts | None = None
        self._readable: bool | None = None

    @property
    def counts(self) -> FleetCounts | None:
        return self._counts

    def refresh(self) -> FleetCounts | None:
        """Count the store now (blocking: call it from a thread); the last good count if
        the store cannot be read."""
        try:
            records = self._fleet.records()
            members = self._fleet.pool_members()
        except SiestaError as error:
            log.warning("fleet gauges: the store cannot be read: %s", error)
            with self._lock:
                self._readable = False
                return self._counts
        sessions = Counter(record.status.value for record in records)
        # By version (`id:tag`): a member's key also names its build.
        pool = Counter(member.image_id.partition("@")[0] for member in members)
        counts = FleetCounts(
            self._clock(),
            {status.value: sessions.get(status.value, 0) for status in SessionStatus},
            dict(sorted(pool.items())),
        )
        with self._lock:
            self._counts, self._readable = counts, True
        return counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            counts, readable = self._counts, self._readable
        sessions = GaugeMetricFamily(
            "siesta_sessions",
            "Session records by status, deployment-wide (aggregate with max, not sum)",
            labels=["status"],
        )
        members = GaugeMetricFamily(
            "siesta_pool_members",
            "Ready sandboxes in the warm pool, deployment-wide (aggregate with max, not sum)",
            labels=["image"],
        )
        if counts is not None:
            for status, count in counts.sessions.items():
                sessions.add_metric([status], count)
            for image, count in counts.pool_members.items():
                members.add_metric([image], count)
        yield sessions
        yield members
        store = GaugeMetricFamily(
            "siesta_store_readable",
            "1 if this instance's last count of the fleet read the store, 0 if it failed",
        )
        if readable is not None:
            store.add_metric([], 1 if readable else 0)
        yield store
