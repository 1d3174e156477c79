"""``k8s/monitoring/``: every metric the Grafana dashboard and the alert rules query
exists in a running service's ``/metrics`` (the fake provider, after a few requests),
with the suffix its type gives it (``_total``, ``_bucket``/``_count``/``_sum``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import yaml

from tests.helpers import REPO, TOKEN, wait_until
from tests.inprocess import in_process_service

MONITORING = REPO / "k8s" / "monitoring"
SYNTHETIC = {"up"}
"""Series Prometheus makes itself for every target, never in an exposition."""
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("", "_count", "_sum"),
    "untyped": ("",),
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
KEYWORDS |= {"and", "or", "unless", "inf", "nan"}
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "X-Siesta-Org": "org-a",
    "X-Siesta-User": "user-1",
    "X-Siesta-Base-Image": "debian-base",
}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def alert_expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    return [rule["expr"] for group in rules["spec"]["groups"] for rule in group["rules"]]


def metric_names(expression: str) -> set[str]:
    """Metric names in a PromQL expression: what is left once strings, label matchers,
    ranges, grouping clauses, functions (a name before ``(``) and keywords are out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names: set[str] = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group().lower() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def exposed_names(exposition: str) -> set[str]:
    """Every series name the exposition has, and those its ``# TYPE`` lines declare
    (a labelled counter no one has touched yet has no sample, only its type)."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            base = name.removesuffix("_total") if kind == "counter" else name
            names.update(base + suffix for suffix in SUFFIXES[kind])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


@pytest.fixture(scope="module")
def exposition(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_METRICS__FLEET_REFRESH_SECONDS": "0.05"}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as service:
        client = service.client
        answer = client.post(
            "/v1/conversations/conv-monitoring/sandbox/runCommand",
            json={"command": "echo hi"},
            headers=HEADERS,
        )
        assert answer.status_code == 200, answer.text
        client.get("/readyz")
        client.get("/no/such/route")
        counted = 'siesta_sessions{status="active"} 1.0'
        assert wait_until(lambda: counted in client.get("/metrics").text)
        yield client.get("/metrics").text


def test_the_service_monitor_scrapes_the_services_port() -> None:
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    service = yaml.safe_load((REPO / "k8s" / "base" / "service.yaml").read_text())
    assert monitor["kind"] == "ServiceMonitor"
    # The Service's own labels, not the base's common ones: Redis's and the egress
    # proxy's Services carry those too.
    selected = monitor["spec"]["selector"]["matchLabels"]
    assert selected.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert dashboard_expressions() and alert_expressions()


@pytest.mark.parametrize(
    "expression", dashboard_expressions() + alert_expressions(), ids=lambda e: e[:60]
)
def test_every_metric_queried_exists(exposition: str, expression: str) -> None:
    names = metric_names(expression)
    assert names, expression
    assert names - SYNTHETIC <= exposed_names(exposition), expression


def test_the_request_metrics_have_samples_not_only_a_type(exposition: str) -> None:
    route = "/v1/conversations/{conversation_id}/sandbox/runCommand"
    assert f'siesta_http_requests_total{{method="POST",route="{route}",status="2xx"}}' in exposition
    assert 'siesta_http_request_duration_seconds_bucket{le="0.005",method="GET"' in exposition
    assert 'siesta_readiness{check="store"} 1.0' in exposition
    assert "siesta_store_readable 1.0" in exposition


def test_the_metric_name_reader_skips_functions_labels_and_clauses() -> None:
    found = metric_names(
        'histogram_quantile(0.95, sum by (le, route) (rate(a_bucket{job=~"x|y",r!~"/v1/.*"}'
        "[5m]))) / on (job) group_left max without (pod) (b) > bool 2 and c"
    )
    assert found == {"a_bucket", "b", "c"}
