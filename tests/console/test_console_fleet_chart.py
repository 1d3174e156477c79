"""The overview's fleet over time: inline SVG charts of the samples the service keeps
(``api/fleet_history.py``, ``api/console/chart.py``), drawn once there are two."""

from __future__ import annotations

import re
from pathlib import Path

from tests.console.helpers import CONSOLE_TOKENS, browser, sign_in
from tests.helpers import TOKEN, wait_until
from tests.inprocess import in_process_service

HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "X-Siesta-Org": "org-a",
    "X-Siesta-User": "user-1",
    "X-Siesta-Base-Image": "debian-base",
}


def polylines(page: str) -> dict[str, list[str]]:
    """Each series' title and its points."""
    found = re.findall(r'points="([^"]*)"><title>([^<]+)</title>', page)
    return {name: points.split() for points, name in found}


def test_the_overview_charts_sandboxes_pool_claims_and_latency(tmp_path: Path) -> None:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOKENS": CONSOLE_TOKENS,
        "SIESTA_METRICS__FLEET_REFRESH_SECONDS": "0.05",
        "SIESTA_METRICS__HISTORY_SAMPLES": "20",
    }
    with in_process_service(tmp_path, env) as service:
        client = browser(service)
        sign_in(client)
        for conversation in ("conv-chart-1", "conv-chart-2"):
            answer = service.client.post(
                f"/v1/conversations/{conversation}/sandbox/runCommand",
                json={"command": "echo hi"},
                headers=HEADERS,
            )
            assert answer.status_code == 200, answer.text
        history = service.client.app.state.fleet_history  # type: ignore[attr-defined]
        # Both sandboxes in the latest sample: the sampler runs on its own, maybe behind.
        assert wait_until(
            lambda: len(history.samples()) == 20 and history.samples()[-1].active == 2
        )
        page = client.get("/console").text

    assert page.count('data-testid="fleet-chart"') == 3
    lines = polylines(page)
    assert lines.keys() == {"active", "paused", "hits", "misses", "p95"}
    assert len(lines["active"]) == 20  # the ring's size, never more
    top = re.search(r"Sandboxes <span class=\"hint\">\(top ([0-9.]+)\)", page)
    assert top is not None and float(top.group(1)) == 2
    assert "active: 2" in page
    x_last, y_last = lines["active"][-1].split(",")
    assert float(x_last) == 300 and float(y_last) == 2  # 2 of 2: the top, 2 px in


def test_the_overview_says_when_there_is_nothing_to_chart_yet(tmp_path: Path) -> None:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOKENS": CONSOLE_TOKENS,
        "SIESTA_METRICS__FLEET_REFRESH_SECONDS": "3600",
    }
    with in_process_service(tmp_path, env) as service:
        client = browser(service)
        sign_in(client)
        page = client.get("/console").text
    assert "Not enough samples yet." in page
    assert "<polyline" not in page
