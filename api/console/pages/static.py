"""The console's style sheet and its one script (the image build page's live log);
no fonts, nothing from elsewhere."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from api.console.routing import PREFIX, ConsoleRoute

STATIC = Path(__file__).resolve().parent.parent / "static"
STYLE = STATIC / "console.css"
BUILD_LOG = STATIC / "build-log.js"

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(f"{PREFIX}/static/console.css")
def style_sheet() -> FileResponse:
    return FileResponse(STYLE, media_type="text/css")


@router.get(f"{PREFIX}/static/build-log.js")
def build_log_script() -> FileResponse:
    return FileResponse(BUILD_LOG, media_type="text/javascript")
