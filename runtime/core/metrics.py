"""Prometheus metrics of one service process (``GET /metrics``).

Counters and histograms live in this module's registry; the number of sessions by
status and of warm-pool members are counted from the store every so often
(``runtime/sessions/fleet_gauges.py``), requests by ``api/request_metrics.py``.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram, ProcessCollector
from prometheus_client import Counter as CounterMetric

from runtime.core.errors import SiestaError
from runtime.core.version import version

REGISTRY = CollectorRegistry(auto_describe=True)
# A registry of our own has none of the default one's collectors: CPU, memory and
# open files of this process (``process_*``, read from /proc; nothing elsewhere).
ProcessCollector(registry=REGISTRY)
BUILD_INFO = Gauge(
    "siesta_build_info",
    "Always 1: the service's version and the Python it runs on, as labels",
    ["version", "python"],
    registry=REGISTRY,
)
BUILD_INFO.labels(version(), platform.python_version()).set(1)
DISK_COPY_ON_WRITE = Gauge(
    "siesta_disk_copy_on_write",
    "1 if the sandboxes' disk folder clones files by reference (XFS with reflink=1): "
    "snapshots and forks clone their disks in milliseconds; 0: they copy the bytes",
    registry=REGISTRY,
)
READINESS = Gauge(
    "siesta_readiness",
    "1 if the dependency answered this instance's last readiness check (GET /readyz, "
    "as the kubelet's probe asks it), 0 if it did not",
    ["check"],
    registry=REGISTRY,
)
egress_log = logging.getLogger("runtime.egress")

OPERATIONS = CounterMetric(
    "siesta_operations",
    "Sandbox function calls by function and outcome code",
    ["function", "outcome"],
    registry=REGISTRY,
)
OPERATION_SECONDS = Histogram(
    "siesta_operation_seconds",
    "Duration of sandbox function calls",
    ["function"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
    registry=REGISTRY,
)
PROVISION_SECONDS = Histogram(
    "siesta_provision_seconds",
    "Time to create and start a sandbox",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
    registry=REGISTRY,
)
RESUME_SECONDS = Histogram(
    "siesta_resume_seconds",
    "Time to resume a suspended sandbox",
    ["tier"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
    registry=REGISTRY,
)
RECONCILE_ACTIONS = CounterMetric(
    "siesta_reconcile_actions",
    "Changes made by reconciliation passes",
    ["action"],
    registry=REGISTRY,
)
POOL_CLAIMS = CounterMetric(
    "siesta_pool_claims",
    "First operations that found a ready sandbox in the warm pool (hit) or not (miss)",
    ["outcome"],
    registry=REGISTRY,
)
POOL_REFILL_ERRORS = CounterMetric(
    "siesta_pool_refill_errors",
    "Warm-pool refills that failed as a whole",
    registry=REGISTRY,
)
POOL_MISSES = CounterMetric(
    "siesta_pool_misses",
    "First operations the warm pool could not serve, by image and why: empty (no ready "
    "member), resume_failed (the member could not be resumed and was discarded)",
    ["image", "reason"],
    registry=REGISTRY,
)
POOL_TARGET = Gauge(
    "siesta_pool_target",
    "Ready sandboxes the warm pool aims at per image, sized from recent arrivals",
    ["image"],
    registry=REGISTRY,
)
POOL_MAKING = Gauge(
    "siesta_pool_making",
    "Warm-pool members this instance is making now, per image",
    ["image"],
    registry=REGISTRY,
)
POOL_MADE = CounterMetric(
    "siesta_pool_made",
    "Warm-pool members made, per image",
    ["image"],
    registry=REGISTRY,
)
POOL_DISCARDED = CounterMetric(
    "siesta_pool_discarded",
    "Warm-pool members removed unclaimed, per image and why: surplus (demand fell), "
    "failed (could not be made), trimmed (gone or changed underneath, image disabled)",
    ["image", "reason"],
    registry=REGISTRY,
)
PROVISION_QUEUE = Gauge(
    "siesta_provision_queue",
    "First operations waiting for a turn to make their sandbox (this instance)",
    registry=REGISTRY,
)
PROVISION_QUEUE_SECONDS = Histogram(
    "siesta_provision_queue_seconds",
    "Time a first operation waited for its turn to make a sandbox",
    buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
    registry=REGISTRY,
)
PROVISION_QUEUE_REFUSALS = CounterMetric(
    "siesta_provision_queue_refusals",
    "First operations refused because SIESTA_PROVISION__QUEUE_LIMIT were already waiting",
    registry=REGISTRY,
)
CREATE_PHASE_SECONDS = Histogram(
    "siesta_sandbox_create_phase_seconds",
    "Where making a sandbox spends its time: workspace (disk and volume), container "
    "(the engine's create), layer (the writable layer's disk), start, attach (the "
    "agent's first answer)",
    ["phase"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    registry=REGISTRY,
)


@contextlib.contextmanager
def create_phase(name: str) -> Iterator[None]:
    """Times one phase of making a sandbox (``siesta_sandbox_create_phase_seconds``)."""
    started = time.monotonic()
    try:
        yield
    finally:
        CREATE_PHASE_SECONDS.labels(name).observe(time.monotonic() - started)


RECONCILE_ERRORS = CounterMetric(
    "siesta_reconcile_errors",
    "Failures inside reconciliation: one item (a session, an orphan) or a whole pass",
    ["stage"],
    registry=REGISTRY,
)
EGRESS_REFUSALS = CounterMetric(
    "siesta_egress_refusals",
    "Requests the egress proxy refused, by org and reason (the conversation and the host "
    "are in the log line and the sandbox's own refusals, never labels: a sandbox names "
    "whatever host it likes)",
    ["org", "reason"],
    registry=REGISTRY,
)
REFUSAL_REASONS = frozenset(
    {
        "host_not_allowed",
        "internet_off",
        "not_in_sandbox_allow",
        "sandbox_deny",
        "ip_literal",
        "address_not_allowed",
        "unauthenticated",
        "credentials_expired",
        "credentials_revoked",
        "connect_failed",
        "dns_failed",
        "head_too_large",
        "bad_request",
        "busy",
        "too_many_connections",
    }
)
"""The reasons the egress proxy gives; anything else is counted as ``other``."""
MAX_LOGGED_HOST_CHARS = 255
"""A host name is at most 253 characters: a longer one is cut in the log line."""
EGRESS_CONNECTIONS = CounterMetric(
    "siesta_egress_connections",
    "Connections through the egress proxy by result (allowed, refused, failed)",
    ["result"],
    registry=REGISTRY,
)
EGRESS_REVOCATION_READ_FAILURES = CounterMetric(
    "siesta_egress_revocation_read_failures",
    "Reads of revoked credentials the egress proxy could not make (it serves on with "
    "the revocations it knows)",
    registry=REGISTRY,
)
AGENT_PROTOCOL_ERRORS = CounterMetric(
    "siesta_agent_protocol_errors",
    "Channels to sandbox agents closed because the agent broke the protocol, by the rule "
    "it broke (runtime/providers/agent/protocol.py ProtocolError)",
    ["reason"],
    registry=REGISTRY,
)


def record_egress_event(event: dict[str, Any]) -> None:
    """One line from the egress proxy: counted, and logged unless it was allowed."""
    kind = str(event.get("event", ""))
    if kind.startswith("revocations_") or kind == "closed":
        _record_revocation_event(kind, event)
        return
    if kind in ("network_rules_unavailable", "refusals_unrecorded"):
        # The store could not be read or written: the proxy went on (sandbox_rules.py).
        egress_log.warning(
            "egress %s for %s/%s: %s",
            kind,
            event.get("org") or "?",
            event.get("conversation") or "?",
            event.get("detail", ""),
        )
        return
    if kind not in ("allowed", "refused", "failed"):
        return
    EGRESS_CONNECTIONS.labels(kind).inc()
    if kind == "allowed":
        return
    if kind == "refused":
        reason = str(event.get("reason", ""))
        EGRESS_REFUSALS.labels(
            str(event.get("org", ""))[:MAX_LOGGED_HOST_CHARS],
            reason if reason in REFUSAL_REASONS else "other",
        ).inc()
    egress_log.warning(
        "egress %s for %s/%s: %s:%s (%s) %s",
        kind,
        event.get("org") or "?",
        event.get("conversation") or "?",
        str(event.get("host"))[:MAX_LOGGED_HOST_CHARS],
        event.get("port"),
        event.get("reason"),
        str(event.get("detail", ""))[: 4 * MAX_LOGGED_HOST_CHARS],  # it may quote the host
    )


def _record_revocation_event(kind: str, event: dict[str, Any]) -> None:
    if kind == "revocations_unavailable":
        EGRESS_REVOCATION_READ_FAILURES.inc()
        egress_log.warning(
            "the egress proxy cannot read revoked credentials (it serves on with those it "
            "knows): %s",
            event.get("detail", ""),
        )
    elif kind == "revocations_available":
        egress_log.info(
            "the egress proxy reads revoked credentials again (%s known)", event.get("known")
        )
    elif kind == "closed":
        egress_log.warning(
            "egress closed for %s/%s: %s (%s)",
            event.get("org") or "?",
            event.get("conversation") or "?",
            event.get("detail", ""),
            event.get("reason"),
        )


@contextlib.contextmanager
def measured(function: str) -> Iterator[None]:
    """Count one call of ``function`` by outcome (``ok`` or its error code) and time it."""
    started = time.monotonic()
    outcome = "internal_error"
    try:
        yield
        outcome = "ok"
    except SiestaError as error:
        outcome = error.code
        raise
    finally:
        OPERATIONS.labels(function, outcome).inc()
        OPERATION_SECONDS.labels(function).observe(time.monotonic() - started)
