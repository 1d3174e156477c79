"""``siesta_sessions`` and ``siesta_pool_members`` answer the last count of the store:
a scrape never reads it, and a store that cannot be read keeps the last counts and
says so (``runtime/sessions/fleet_gauges.py``)."""

from __future__ import annotations

from typing import cast

from prometheus_client import CollectorRegistry

from runtime.core.errors import StateUnavailable
from runtime.core.records import PoolMember, SessionRecord, SessionStatus
from runtime.sessions.fleet import Fleet
from runtime.sessions.fleet_gauges import FleetGauges


def record(conversation: str, status: SessionStatus) -> SessionRecord:
    return SessionRecord(
        org="org-a",
        conversation=conversation,
        session_id=f"s-{conversation}",
        sandbox_id=f"sandbox-{conversation}",
        image_id="debian-base",
        image_ref="siesta/debian-base:1",
        status=status,
        created_at=0.0,
        last_used_at=0.0,
        generation=1,
    )


class CountingFleet:
    def __init__(self) -> None:
        self.reads = 0
        self.broken = False
        self.sessions = [
            record("c1", SessionStatus.ACTIVE),
            record("c2", SessionStatus.ACTIVE),
            record("c3", SessionStatus.PAUSED),
        ]

    def records(self) -> list[SessionRecord]:
        self.reads += 1
        if self.broken:
            msg = "the store does not answer"
            raise StateUnavailable(msg)
        return self.sessions

    def pool_members(self) -> list[PoolMember]:
        return []


def scrape(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_scrape_answers_the_last_count_without_reading_the_store() -> None:
    fleet = CountingFleet()
    gauges = FleetGauges(cast(Fleet, fleet), clock=lambda: 1000.0)
    registry = CollectorRegistry()
    registry.register(gauges)
    assert scrape(registry, "siesta_sessions", status="active") is None  # not counted yet
    gauges.refresh()
    fleet.sessions.append(record("c4", SessionStatus.ACTIVE))
    for _ in range(5):
        assert scrape(registry, "siesta_sessions", status="active") == 2
    assert scrape(registry, "siesta_sessions", status="lost") == 0  # every state, always
    assert fleet.reads == 1
    gauges.refresh()
    assert scrape(registry, "siesta_sessions", status="active") == 3
    assert scrape(registry, "siesta_store_readable") == 1


def test_a_store_that_cannot_be_read_keeps_the_last_counts_and_says_so() -> None:
    fleet = CountingFleet()
    gauges = FleetGauges(cast(Fleet, fleet))
    registry = CollectorRegistry()
    registry.register(gauges)
    gauges.refresh()
    fleet.broken = True
    counts = gauges.refresh()
    assert counts is not None and counts.sessions["paused"] == 1
    assert scrape(registry, "siesta_sessions", status="paused") == 1
    assert scrape(registry, "siesta_store_readable") == 0
