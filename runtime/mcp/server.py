"""The MCP server: the agent functions as tools, each call a direct call.

A call runs like one on the direct HTTP routes: ``ToolExecutor.run_direct`` checks
the deployment's policy, writes the executions log and runs the function under
the conversation's lease and limits. A script's ``logStatus`` and a command's
output chunks become progress notifications when the client asked for them (a
progress token); they come from a worker thread and reach the event loop through
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from anyio import to_thread
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types.jsonrpc import INVALID_PARAMS

from runtime.core import logs
from runtime.core.cancellation import Cancellation
from runtime.core.errors import SiestaError, ToolFailed
from runtime.core.version import version
from runtime.functions.base import FunctionSpec, tool_schema
from runtime.functions.js import JS_EXECUTOR
from runtime.functions.processes import PROCESSES
from runtime.functions.sandbox import SANDBOX
from runtime.mcp import resources, results
from runtime.mcp.caller import McpCaller
from runtime.services import Services
from runtime.tools.call import CallEvents, FailedWithResult

log = logging.getLogger(__name__)

TOOLS: dict[str, tuple[FunctionSpec, str]] = {
    **{spec.name: (spec, "sandbox") for spec in [*SANDBOX, *PROCESSES]},
    JS_EXECUTOR.name: (JS_EXECUTOR, "js_executor"),
}
"""Each tool's function and the System Tool it belongs to (as on the direct routes)."""

READ_ONLY = frozenset({"readFile", "listFiles", "readProcess"})
PROGRESS_QUEUE = 256
"""Notifications waiting for a slow client; more are dropped (the result has all)."""


Resolve = Callable[[ServerRequestContext[Any, Any]], McpCaller]
"""The caller of one request; raises ``SiestaError`` when it has no valid context."""


def build_server(services: Services, resolve: Resolve) -> Server[Any]:
    tools = [_tool(spec) for spec, _ in TOOLS.values()]  # schemas are made once
    schemas = {tool.name: tool.input_schema for tool in tools}

    systems = {name: tool for name, (_, tool) in TOOLS.items()}

    async def list_tools(
        request: ServerRequestContext[Any, Any], __: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The tools this caller may call: a disabled function, or one of a System Tool
        a registered agent does not have, is not offered (as in the catalog)."""
        ctx = _resolved(request).ctx
        allowed = set(await to_thread.run_sync(services.tools.direct_available, ctx, systems))
        return types.ListToolsResult(tools=[tool for tool in tools if tool.name in allowed])

    async def call_tool(
        request: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in TOOLS:
            return results.failure({"code": "not_found", "message": f"no tool {params.name!r}"})
        spec, tool = TOOLS[params.name]
        arguments = dict(params.arguments or {})
        try:
            caller = resolve(request)
            logs.CALLER.set(caller.requested_by)  # this task's: the worker thread copies it
            logs.CONVERSATION.set(caller.ctx.conversation)
            spec.parse(arguments)  # a bad call is refused before it is held or logged

            def run(events: CallEvents) -> Any:
                return services.tools.run_direct(
                    caller.ctx, spec, tool, arguments, caller.requested_by, events
                )

            result = await _with_progress(request, run)
        except FailedWithResult as failed:  # a script that failed: its logs are worth reading
            details = {k: v for k, v in failed.result.items() if k != "error"}
            return results.failure(failed.result["error"], details)
        except SiestaError as error:
            return results.error_failure(error)
        except Exception:
            log.exception("MCP call of %s failed", params.name)
            return results.error_failure(ToolFailed(f"{params.name} failed"))
        return results.success(spec.name, dict(result), caller.file_link)

    async def list_files(
        request: ServerRequestContext[Any, Any], _: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        caller = _resolved(request)
        return await to_thread.run_sync(resources.list_files, services, caller)

    async def read_file(
        request: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        caller = _resolved(request)
        try:
            return await to_thread.run_sync(resources.read_file, services, caller, params.uri)
        except SiestaError as error:
            raise MCPError(INVALID_PARAMS, error.message, error.to_dict()) from error

    def _resolved(request: ServerRequestContext[Any, Any]) -> McpCaller:
        try:
            return resolve(request)
        except SiestaError as error:
            raise MCPError(INVALID_PARAMS, error.message, error.to_dict()) from error

    return Server(
        "siesta-runtime",
        version=version(),
        instructions="A Linux workspace (/mnt/work) and a JavaScript executor for one "
        "conversation. Files and installed packages persist between calls; processes "
        "started with startProcess keep running.",
        get_tool_input_schema=schemas.get,  # else each call lists the tools to check headers
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_files,
        on_read_resource=read_file,
    )


def _tool(spec: FunctionSpec) -> types.Tool:
    read_only = spec.name in READ_ONLY
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.parameters(),
        output_schema=tool_schema(spec.result) if spec.result else None,
        annotations=types.ToolAnnotations(
            read_only_hint=read_only, destructive_hint=False if read_only else None
        ),
    )


async def _with_progress(
    request: ServerRequestContext[Any, Any], work: Callable[[CallEvents], Any]
) -> Any:
    """Run ``work`` on a worker thread; its statuses and output chunks become progress
    notifications as they come. A cancelled request cancels the call."""
    cancellation = Cancellation()
    if progress_token_from_params(request.params) is None:
        return await _on_thread(lambda: work(CallEvents(cancellation=cancellation)), cancellation)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue(maxsize=PROGRESS_QUEUE)

    def offer(message: str) -> None:
        with contextlib.suppress(asyncio.QueueFull):  # never blocks the loop, never grows
            queue.put_nowait(message)

    def on_status(message: str) -> None:  # on the worker thread
        loop.call_soon_threadsafe(offer, message)

    def on_output(stream: str, data: bytes) -> None:  # on the worker thread
        loop.call_soon_threadsafe(offer, f"{stream}: {data.decode('utf-8', errors='replace')}")

    events = CallEvents(status=on_status, output=on_output, cancellation=cancellation)
    task = asyncio.ensure_future(_on_thread(lambda: work(events), cancellation))
    sent = 0
    try:
        # Messages the thread queued are delivered before its completion (both go
        # through the loop's callbacks in order), so none is lost at the end.
        while not task.done() or not queue.empty():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                sent += 1
                await request.session.report_progress(sent, None, getter.result())
            else:
                getter.cancel()
        return await task
    finally:
        if not task.done():  # the request was cancelled: stop the call
            cancellation.cancel()


async def _on_thread(call: Callable[[], Any], cancellation: Cancellation) -> Any:
    """``call`` on a worker thread; if the request is cancelled, the call is told to
    stop and still waited for, so that it releases the conversation's lease."""
    task = asyncio.ensure_future(to_thread.run_sync(call))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancellation.cancel()
        with contextlib.suppress(Exception):
            await task
        raise
