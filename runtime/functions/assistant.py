"""Functions that help the agent itself: image generation, setup help, batches
(models: ``siesta_contract.functions.assistant``)."""

from __future__ import annotations

from siesta_contract.functions.assistant import (
    BatchArgs,
    BatchResult,
    HelpArgs,
    ImageArgs,
    ImageResult,
)

from runtime.functions.base import FunctionSpec

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
