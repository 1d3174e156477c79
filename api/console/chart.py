"""Small line charts drawn on the server as inline SVG (the overview's fleet over
time): a polyline per series, no script, so the console's Content-Security-Policy
stays ``script-src 'self'`` and the page reads the same without JavaScript."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api.fleet_history import FleetSample

WIDTH = 300
HEIGHT = 80
PAD = 2
"""Room above the top and below zero: a line on an edge would be cut in half."""


@dataclass(frozen=True)
class Line:
    name: str
    points: str
    """SVG polyline points, ``x,y`` pairs; a missing value is left out (no request in
    that interval: no latency to draw)."""
    last: float | None


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    top: float
    """The value at the top edge: the largest drawn, at least 1 of ``unit``."""
    lines: list[Line]
    width: int = WIDTH
    height: int = HEIGHT


def chart(title: str, unit: str, series: dict[str, Sequence[float | None]]) -> Chart:
    values = [value for points in series.values() for value in points if value is not None]
    top = max([1.0, *values]) if unit != "s" else max([0.001, *values])
    lines = []
    for name, points in series.items():
        step = WIDTH / max(1, len(points) - 1)
        drawn = [
            f"{index * step:.1f},{PAD + (HEIGHT - 2 * PAD) * (1 - value / top):.1f}"
            for index, value in enumerate(points)
            if value is not None
        ]
        last = next((value for value in reversed(points) if value is not None), None)
        lines.append(Line(name, " ".join(drawn), last))
    return Chart(title, unit, top, lines)


def fleet_charts(samples: list[FleetSample]) -> list[Chart]:
    """Sandboxes active and paused, the warm pool's hits and misses per interval, and
    the p95 time to answer per interval."""
    return [
        chart(
            "Sandboxes",
            "",
            {"active": [s.active for s in samples], "paused": [s.paused for s in samples]},
        ),
        chart(
            "Warm pool claims",
            "",
            {"hits": [s.pool_hits for s in samples], "misses": [s.pool_misses for s in samples]},
        ),
        chart("Time to answer, p95", "s", {"p95": [s.p95_seconds for s in samples]}),
    ]
