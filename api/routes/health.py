from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up. No auth, no dependencies: for liveness probes.

    ``async`` on purpose: it must answer even when every worker thread is busy
    running long commands.
    """
    return {"status": "ok"}
