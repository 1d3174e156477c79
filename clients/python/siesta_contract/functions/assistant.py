"""Functions that help the agent itself: image generation, setup help, batches."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from siesta_contract.base import Arguments, Result
from siesta_contract.files import FilePublic

ImageSize = Literal["1024x1024", "1536x1024", "1024x1536", "auto"]
AspectRatio = Literal["square", "landscape", "portrait"]
ASPECT_SIZES: dict[AspectRatio, ImageSize] = {
    "square": "1024x1024",
    "landscape": "1536x1024",
    "portrait": "1024x1536",
}
"""The sizes the OpenAI Images API takes for gpt-image models, by shape."""


class ImageArgs(Arguments):
    prompt: str = Field(min_length=1, description="What to draw")
    size: ImageSize | None = Field(None, description="Pixel size; default auto (the model chooses)")
    aspectRatio: AspectRatio | None = Field(
        None,
        description="Shorthand for size: square 1024x1024, landscape 1536x1024, portrait 1024x1536",
    )

    @model_validator(mode="after")
    def _one_shape(self) -> ImageArgs:
        if self.aspectRatio and self.size and self.size != ASPECT_SIZES[self.aspectRatio]:
            msg = (
                f"size {self.size} conflicts with aspectRatio {self.aspectRatio} "
                f"({ASPECT_SIZES[self.aspectRatio]}); give one of them"
            )
            raise ValueError(msg)
        return self

    @property
    def chosen_size(self) -> ImageSize | None:
        """The size to ask for; ``None``: the API's default (auto)."""
        return self.size or (ASPECT_SIZES[self.aspectRatio] if self.aspectRatio else None)


class ImageResult(Result):
    artifact: FilePublic
    size: ImageSize
    messageId: str | None = None


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
