"""The agent's sandbox functions: the model's tool call body in, its result out.

Handlers are plain ``def``: the runtime is synchronous (the Docker SDK is), so
FastAPI runs each call in its thread pool.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from api.deps import Authenticated, ContextDep, ServicesDep
from runtime.metrics import measured

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox",
    tags=["sandbox"],
    dependencies=Authenticated,
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunCommand(_Body):
    command: str
    timeoutSeconds: int | None = None
    files: list[str] | None = None
    """Conversation files (names or ids) to stage under ``/mnt/work/in`` first."""


class WriteFile(_Body):
    path: str
    content: str


class ReadFile(_Body):
    path: str
    maxBytes: int | None = None


class ListFiles(_Body):
    path: str = "."


class PublishFiles(_Body):
    paths: list[str]


@router.post("/runCommand")
def run_command(body: RunCommand, ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """Run ``bash -lc command`` in ``/mnt/work``; a nonzero exit is a normal result."""
    with measured("runCommand"):
        return services.sandbox.run_command(ctx, body.command, body.timeoutSeconds, body.files)


@router.post("/writeFile")
def write_file(body: WriteFile, ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """Write UTF-8 text to a path inside ``/mnt/work``."""
    with measured("writeFile"):
        return services.sandbox.write_file(ctx, body.path, body.content)


@router.post("/readFile")
def read_file(body: ReadFile, ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """Read a workspace file: text as text, binary as base64, with truncation reported."""
    with measured("readFile"):
        return services.sandbox.read_file(ctx, body.path, body.maxBytes)


@router.post("/listFiles")
def list_files(body: ListFiles, ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """List one workspace folder (not recursive)."""
    with measured("listFiles"):
        return services.sandbox.list_files(ctx, body.path)


@router.post("/publishFiles")
def publish_files(body: PublishFiles, ctx: ContextDep, services: ServicesDep) -> dict[str, Any]:
    """Publish workspace files as conversation artifacts; failures are reported per path."""
    with measured("publishFiles"):
        return services.sandbox.publish_files(ctx, body.paths)
