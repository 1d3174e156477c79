"""The agent's sandbox functions: the model's tool call body in, its result out.

Handlers are plain ``def``: the runtime is synchronous (the Docker SDK is), so
FastAPI runs each call in its thread pool.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from api.deps import Authenticated, ContextDep, ServicesDep

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox",
    tags=["sandbox"],
    dependencies=Authenticated,
)


class RunCommand(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)

    command: str
    timeoutSeconds: int | None = None


@router.post("/runCommand")
def run_command(body: RunCommand, ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """Run ``bash -lc command`` in ``/mnt/work``; a nonzero exit is a normal result."""
    return services.sandbox.run_command(ctx, body.command, body.timeoutSeconds)
