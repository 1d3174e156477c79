"""Adapters of the System Tools this service runs itself: the sandbox functions,
the JavaScript executor and ``run_function_batch``.

Arguments are validated with the function models the catalog's schemas come from
(``runtime/functions``); a bad argument is an ``invalid_arguments`` result, never
an exception that ends the agent's turn.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from siesta_contract.functions.assistant import BatchArgs, BatchItem, BatchResult
from siesta_contract.functions.js import JsArgs
from siesta_contract.functions.sandbox import (
    ListFilesArgs,
    PublishFilesArgs,
    ReadFileArgs,
    RunCommandArgs,
    WriteFileArgs,
)

from runtime.agents import AgentGateway, Deadline, call_parallel, check_allowed
from runtime.agents.settings import AgentSettings
from runtime.core.errors import InvalidArguments
from runtime.functions.assistant import RUN_FUNCTION_BATCH
from runtime.functions.base import parse_arguments
from runtime.functions.js import JS_EXECUTOR
from runtime.jsexec.executor import JsExecutor
from runtime.sandbox.operations import Sandbox
from runtime.tools.call import Adapter, FailedWithResult, ToolCall
from runtime.tools.settings import ToolSettings


def sandbox_adapters(sandbox: Sandbox) -> dict[str, Adapter]:
    def run_command(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(RunCommandArgs, "runCommand", arguments)
        return _wire(
            sandbox.run_command(
                call.ctx,
                a.command,
                a.timeoutSeconds,
                a.files,
                on_output=call.events.output,
                cancellation=call.events.cancellation,
            )
        )

    def write_file(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(WriteFileArgs, "writeFile", arguments)
        return _wire(sandbox.write_file(call.ctx, a.path, a.content))

    def read_file(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(ReadFileArgs, "readFile", arguments)
        return _wire(sandbox.read_file(call.ctx, a.path, a.maxBytes, a.offset))

    def list_files(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(ListFilesArgs, "listFiles", arguments)
        return _wire(sandbox.list_files(call.ctx, a.path))

    def publish_files(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(PublishFilesArgs, "publishFiles", arguments)
        return _wire(sandbox.publish_files(call.ctx, a.paths))

    return {
        "runCommand": run_command,
        "writeFile": write_file,
        "readFile": read_file,
        "listFiles": list_files,
        "publishFiles": publish_files,
    }


def js_adapter(js: JsExecutor) -> Adapter:
    def run(call: ToolCall, arguments: dict[str, Any]) -> Any:
        code = parse_arguments(JsArgs, JS_EXECUTOR.name, arguments).code
        result = js.run(call.ctx, code, call.timeout_seconds, call.events.status)
        if result.error is not None:  # the script failed: a failed execution, logs kept
            raise FailedWithResult(result.model_dump(mode="json", exclude_none=True))
        return result.model_dump(mode="json", exclude_none=True)

    return run


def batch_adapter(gateway: AgentGateway, agents: AgentSettings, tools: ToolSettings) -> Adapter:
    def run(call: ToolCall, arguments: dict[str, Any]) -> Any:
        a = parse_arguments(BatchArgs, RUN_FUNCTION_BATCH.name, arguments)
        if len(a.input) > tools.max_batch_inputs:
            msg = f"{len(a.input)} inputs, over the limit of {tools.max_batch_inputs}"
            raise InvalidArguments(msg, limit=tools.max_batch_inputs)
        check_allowed(call.ctx, [a.functionName])
        deadline = Deadline.after(
            tools.batch_deadline_seconds,
            "the batch deadline (SIESTA_TOOLS__BATCH_DEADLINE_SECONDS)",
        )
        results = call_parallel(
            gateway,
            call.ctx,
            [a.functionName] * len(a.input),
            a.input,
            agents.timeout_seconds,
            tools.max_batch_parallel,
            deadline,
        )
        items = [
            BatchItem(input=text, **outcome) for text, outcome in zip(a.input, results, strict=True)
        ]
        batch = BatchResult(
            functionName=a.functionName,
            results=items,
            failed=sum(1 for outcome in results if not outcome["ok"]),
            unfinished=sum(1 for outcome in results if outcome.get("deadlineExceeded")),
            deadlineSeconds=tools.batch_deadline_seconds,
        )
        return batch.model_dump(mode="json", exclude_none=True)  # an item has one of the two

    return run


def _wire(result: BaseModel) -> Any:
    """A result model as the JSON the model reads (``None`` stays ``null``)."""
    return result.model_dump(mode="json")
