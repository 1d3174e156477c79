"""The console's style sheet (no script, no fonts: nothing else is served)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from api.console.routing import PREFIX, ConsoleRoute

STYLE = Path(__file__).resolve().parent.parent / "static" / "console.css"

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(f"{PREFIX}/static/console.css")
def style_sheet() -> FileResponse:
    return FileResponse(STYLE, media_type="text/css")
