"""``GET /metrics``: a token when the deployment sets one, and never a label a sandbox
could choose (a conversation, a host, a path: each would be a series kept forever)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.metrics import MetricWrapperBase

from runtime.core import metrics
from tests.inprocess import InProcessService, in_process_service

METRICS_TOKEN = "scrape-token-0123456789"
LABELS_ALLOWED = {
    "function",  # the functions' names: a closed set
    "outcome",  # ok or an error code
    "tier",
    "action",
    "image",  # the operators' catalog
    "reason",  # closed sets (an unknown egress reason is "other")
    "stage",
    "org",  # the token's or the credentials' org, never one a sandbox names
    "result",
    "phase",
    "status",  # a session's state; an HTTP status class
    "method",  # HTTP methods, anything else OTHER
    "route",  # route templates, never a path (api/request_metrics.py)
    "version",  # siesta_build_info
    "python",
    "check",  # the readiness checks' names
}


@pytest.fixture
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    """One at a time: each app registers its collectors in the process's registry."""
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_METRICS__TOKEN": METRICS_TOKEN}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-000000000", f"Basic {METRICS_TOKEN}", "Bearer d\xe9j\xe0"],
)
def test_metrics_with_a_token_set_refuse_anyone_without_it(
    guarded: InProcessService, authorization: str | None
) -> None:
    headers = [] if authorization is None else [(b"authorization", authorization.encode("latin-1"))]
    answer = guarded.client.get("/metrics", headers=headers)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthorized"
    assert "SIESTA_METRICS__TOKEN" in answer.json()["error"]["message"]
    assert answer.headers["www-authenticate"] == "Bearer"


def test_metrics_with_a_token_set_answer_it(guarded: InProcessService) -> None:
    answer = guarded.client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert answer.status_code == 200
    assert "siesta_operations" in answer.text


def test_metrics_without_a_token_set_stay_open(tmp_path_factory: pytest.TempPathFactory) -> None:
    env = {"SIESTA_PROVIDER__TYPE": "fake"}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        assert running.client.get("/metrics").status_code == 200


def test_no_metric_is_labelled_by_what_a_sandbox_chooses() -> None:
    declared = {
        name
        for metric in vars(metrics).values()
        if isinstance(metric, MetricWrapperBase)
        for name in metric._labelnames
    }
    scraped = {
        name for family in metrics.REGISTRY.collect() for s in family.samples for name in s.labels
    }
    assert declared | (scraped - {"le"}) <= LABELS_ALLOWED


def test_a_sandboxs_egress_refusal_never_becomes_a_label_value() -> None:
    conversation, host = "conv-label-probe", "x" * 3000 + ".invalid"
    metrics.record_egress_event(
        {
            "event": "refused",
            "org": "org-a",
            "conversation": conversation,
            "host": host,
            "port": 443,
            "reason": "made-up-" + "y" * 100,
        }
    )
    values = {
        value
        for family in metrics.REGISTRY.collect()
        for sample in family.samples
        for value in sample.labels.values()
    }
    assert conversation not in values
    assert not any(host[:100] in value or "made-up" in value for value in values)
