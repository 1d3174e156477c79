"""What a sandbox sends the egress proxy never becomes a metric label: a flood of refused
requests to made-up hosts, from ever new conversations, adds no series and leaves only a
cut host name in the log."""

from __future__ import annotations

import logging
import uuid

import pytest
from prometheus_client import generate_latest

from runtime.core import metrics
from runtime.core.metrics import EGRESS_REFUSALS, MAX_LOGGED_HOST_CHARS, record_egress_event


def series_of(org: str) -> set[tuple[tuple[str, str], ...]]:
    return {
        tuple(sorted((name, value) for name, value in sample.labels.items()))
        for family in EGRESS_REFUSALS.collect()
        for sample in family.samples
        if sample.labels.get("org") == org and sample.name.endswith("_total")
    }


def test_a_flood_of_refusals_to_made_up_hosts_adds_no_series(
    caplog: pytest.LogCaptureFixture,
) -> None:
    org = f"org-{uuid.uuid4().hex[:8]}"
    before = len(generate_latest(metrics.REGISTRY))
    with caplog.at_level(logging.WARNING, logger=metrics.egress_log.name):
        for i in range(2000):
            record_egress_event(
                {
                    "event": "refused",
                    "org": org,
                    "conversation": f"conv-{i}",
                    "host": f"{'x' * 30_000}-{i}.invalid",
                    "port": 443,
                    "reason": "host_not_allowed" if i % 2 else f"made-up-reason-{i}",
                    "detail": "y" * 30_000,
                }
            )
    assert series_of(org) == {
        (("org", org), ("reason", "host_not_allowed")),
        (("org", org), ("reason", "other")),
    }
    assert len(generate_latest(metrics.REGISTRY)) - before < 1024  # two short series
    longest = max(len(record.getMessage()) for record in caplog.records)
    assert longest < 8 * MAX_LOGGED_HOST_CHARS
