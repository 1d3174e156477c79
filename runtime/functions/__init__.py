"""Every agent function's contract, by name (see ``base.py``)."""

from __future__ import annotations

from runtime.functions.assistant import IMAGE_GENERATION, RUN_FUNCTION_BATCH, SIESTA_HELP
from runtime.functions.base import FunctionSpec
from runtime.functions.content import CONTENT
from runtime.functions.js import JS_EXECUTOR
from runtime.functions.knowledge import FILE_SEARCH, KNOWLEDGE
from runtime.functions.memory import MEMORY
from runtime.functions.platform import CREATE_TASK, PLATFORM
from runtime.functions.processes import PROCESSES
from runtime.functions.sandbox import SANDBOX
from runtime.functions.web import FIRECRAWL, GOOGLE_SEARCH, WEB_FETCH

FUNCTIONS: dict[str, FunctionSpec] = {
    spec.name: spec
    for spec in [
        *SANDBOX,
        *PROCESSES,
        JS_EXECUTOR,
        RUN_FUNCTION_BATCH,
        SIESTA_HELP,
        IMAGE_GENERATION,
        CREATE_TASK,
        GOOGLE_SEARCH,
        *FIRECRAWL,
        WEB_FETCH,
        *PLATFORM,
        *CONTENT,
        *MEMORY,
        *KNOWLEDGE,
        FILE_SEARCH,
    ]
}
"""The system functions this service knows (connection functions come with the agent)."""

__all__ = ["FUNCTIONS", "FunctionSpec"]
