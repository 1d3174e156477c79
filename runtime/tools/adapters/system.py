"""Adapters of the System Tools this service runs itself: the sandbox functions,
the JavaScript executor and ``run_function_batch``.

Arguments are validated with the same field names the model sees; a bad
argument is an ``invalid_arguments`` result, never an exception.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.agents import AgentGateway, call_parallel
from runtime.config import AgentSettings, ToolSettings
from runtime.context import CallContext
from runtime.errors import InvalidRequest, SiestaError
from runtime.jsexec.executor import JsExecutor
from runtime.sandbox import Sandbox
from runtime.tools.executor import Adapter

_Args = TypeVar("_Args", bound=BaseModel)


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunCommandArgs(_Arguments):
    command: str
    timeoutSeconds: int | None = None
    files: list[str] | None = None


class WriteFileArgs(_Arguments):
    path: str
    content: str


class ReadFileArgs(_Arguments):
    path: str
    maxBytes: int | None = None


class ListFilesArgs(_Arguments):
    path: str = "."


class PublishFilesArgs(_Arguments):
    paths: list[str]


class JsArgs(_Arguments):
    code: str


class BatchArgs(_Arguments):
    functionName: str = Field(min_length=1)
    input: list[str]


def parse(model: type[_Args], function: str, arguments: dict[str, Any]) -> _Args:
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        msg = f"{function}: bad arguments: {problems}"
        raise InvalidRequest(msg, code="invalid_arguments") from exc


def sandbox_adapters(sandbox: Sandbox) -> dict[str, Adapter]:
    def run_command(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        a = parse(RunCommandArgs, "runCommand", arguments)
        return sandbox.run_command(ctx, a.command, a.timeoutSeconds, a.files)

    def write_file(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        a = parse(WriteFileArgs, "writeFile", arguments)
        return sandbox.write_file(ctx, a.path, a.content)

    def read_file(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        a = parse(ReadFileArgs, "readFile", arguments)
        return sandbox.read_file(ctx, a.path, a.maxBytes)

    def list_files(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        return sandbox.list_files(ctx, parse(ListFilesArgs, "listFiles", arguments).path)

    def publish_files(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        return sandbox.publish_files(ctx, parse(PublishFilesArgs, "publishFiles", arguments).paths)

    return {
        "runCommand": run_command,
        "writeFile": write_file,
        "readFile": read_file,
        "listFiles": list_files,
        "publishFiles": publish_files,
    }


def js_adapter(js: JsExecutor) -> Adapter:
    def run(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        result = js.run(ctx, parse(JsArgs, "JsExecutorAgent", arguments).code)
        if "error" in result:  # the script failed: a failed execution, logs kept
            error = result["error"]
            raise SiestaError(
                str(error.get("message")),
                code=str(error.get("code")),
                **{k: v for k, v in result.items() if k != "error"},
            )
        return result

    return run


def batch_adapter(gateway: AgentGateway, agents: AgentSettings, tools: ToolSettings) -> Adapter:
    def run(ctx: CallContext, arguments: dict[str, Any]) -> Any:
        a = parse(BatchArgs, "run_function_batch", arguments)
        if len(a.input) > tools.max_batch_inputs:
            msg = f"{len(a.input)} inputs, over the limit of {tools.max_batch_inputs}"
            raise InvalidRequest(msg, code="invalid_arguments", limit=tools.max_batch_inputs)
        results = call_parallel(
            gateway,
            ctx,
            [a.functionName] * len(a.input),
            a.input,
            agents.timeout_seconds,
            tools.max_batch_parallel,
        )
        return {
            "functionName": a.functionName,
            "results": [
                {"input": text, **outcome} for text, outcome in zip(a.input, results, strict=True)
            ],
            "failed": sum(1 for outcome in results if not outcome["ok"]),
        }

    return run
