"""JsExecutorAgent as the catalog lists it (models: ``siesta_contract.functions.js``)."""

from __future__ import annotations

from siesta_contract.functions.js import (
    JsArgs,
    JsResult,
)

from runtime.functions.base import FunctionSpec

JS_EXECUTOR = FunctionSpec(
    "JsExecutorAgent",
    "Run synchronous JavaScript with log, logStatus, callAgent, "
    "callAgentsParallel, Excel and artifact helpers; returns the logs and the final expression. "
    "All helpers are synchronous: do not use async, await or Promises (refused with "
    "js_async_not_supported). searchExcelRows matches the whole cell text ignoring case "
    "and surrounding spaces; pass {match: 'contains'} as a fifth argument for substrings. "
    "callAgent and callAgentsParallel reach only this agent's configured sub-agents.",
    JsArgs,
    JsResult,
)
