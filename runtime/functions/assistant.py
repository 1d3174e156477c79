"""Functions that help the agent itself: image generation, setup help, batches."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from runtime.functions.base import Arguments, FunctionSpec, Result
from runtime.functions.files import FilePublic


class ImageArgs(Arguments):
    prompt: str = Field(min_length=1, description="What to draw")


class ImageResult(Result):
    artifact: FilePublic


class HelpArgs(Arguments):
    userRequest: str = Field(min_length=1, description="The user's original request")
    capability: str | None = Field(
        None, description="Best matching capability, e.g. email.send, connections.setup"
    )
    targetService: str | None = Field(None, description="Service the user named explicitly")
    targetServices: list[str] | None = Field(None, description="Services named explicitly")
    targetServiceMentionedByUser: bool = False
    targetAgentId: str | None = Field(None, description="Agent to configure")
    targetAgentName: str | None = Field(None, description="Agent name")
    targetAgentMentionedByUser: bool = False
    intent: (
        Literal[
            "connection_setup", "connection_assignment", "connection_diagnostics", "platform_docs"
        ]
        | None
    ) = Field(None, description="Kind of help")
    topic: str | None = Field(None, description="Documentation topic")


class BatchArgs(Arguments):
    functionName: str = Field(
        min_length=1, description="The sub-agent to call: one of the agent's configured sub-agents"
    )
    input: list[str] = Field(description="One input string per call")


class BatchItem(Result):
    input: str
    ok: bool
    response: str | None = None
    error: str | None = None
    deadlineExceeded: bool | None = None
    """Set when the call was not finished by the batch deadline."""


class BatchResult(Result):
    functionName: str
    results: list[BatchItem]
    failed: int
    unfinished: int = 0
    """Calls cut off by the batch deadline (counted in ``failed`` too)."""
    deadlineSeconds: float
    """The batch deadline in force (``SIESTA_TOOLS__BATCH_DEADLINE_SECONDS``)."""


IMAGE_GENERATION = FunctionSpec(
    "image_generation",
    "Generate an image from a text request; the PNG is stored as a conversation artifact.",
    ImageArgs,
    ImageResult,
)
SIESTA_HELP = FunctionSpec(
    "siesta_help_resolve",
    "Diagnose missing connection or tool setup and return guidance or "
    "an action card. Does not grant permissions.",
    HelpArgs,
)
RUN_FUNCTION_BATCH = FunctionSpec(
    "run_function_batch",
    "Send many inputs to one of this agent's sub-agents, one private "
    "conversation each (at most 40 at once); results combined in input order. "
    "The whole batch has one deadline: calls not finished by then fail.",
    BatchArgs,
    BatchResult,
)
