from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up. No auth, no dependencies: for liveness probes."""
    return {"status": "ok"}
