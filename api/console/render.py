"""Pages drawn with the shared layout: the navigation, who is signed in, and the
session's CSRF token for every form (``render``)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from api.console.routing import PREFIX
from runtime.core.operator_records import ConsoleSession

NAV: list[tuple[str, str, str]] = [
    ("overview", "Overview", PREFIX),
    ("sandboxes", "Sandboxes", f"{PREFIX}/sandboxes"),
    ("images", "Images", f"{PREFIX}/images"),
    ("knowledge", "Knowledge", f"{PREFIX}/knowledge"),
    ("approvals", "Approvals", f"{PREFIX}/approvals"),
    ("executions", "Executions", f"{PREFIX}/executions"),
    ("audit", "Audit", f"{PREFIX}/audit"),
    ("settings", "Settings", f"{PREFIX}/settings"),
]
"""(page, label, path) of the navigation, in its order; ``page`` is what a page
passes to ``render`` to be marked current."""


def when(at: float | None) -> str:
    """A Unix time as UTC, to the second."""
    if at is None:
        return "—"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(at: float | None) -> str:
    """How long ago ``at`` was, roughly (``3 min``)."""
    if at is None:
        return "—"
    seconds = max(0.0, time.time() - at)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def size(count: int | None) -> str:
    """Bytes in the largest unit that keeps the number at or above 1."""
    if count is None:
        return "not known"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def pretty(value: Any) -> str:
    """JSON for people (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def package_version() -> str:
    try:
        return metadata.version("siesta-runtime")
    except metadata.PackageNotFoundError:
        return "unknown"


templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters.update(when=when, ago=ago, size=size, pretty=pretty)
templates.globals.update(nav=NAV, prefix=PREFIX)


def render(
    session: ConsoleSession | None,
    template: str,
    *,
    page: str = "",
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """``template`` inside the layout: ``page`` marks the current navigation entry;
    ``session`` names who is signed in and gives every form its ``csrf`` field."""
    html = templates.get_template(template).render(
        session=session,
        csrf=session.csrf if session else "",
        page=page,
        **context,
    )
    return HTMLResponse(html, status)
