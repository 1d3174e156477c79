"""Every call of the API as an ``Op``: what both clients send, and what they return."""

from __future__ import annotations

from typing import Any

from api.routes.conversations import ConversationDeleted, SandboxPublic
from api.routes.tools import CatalogPublic, ExecutionOutcome, ExecutionsPublic
from runtime.functions.files import FilePublic, FilesPublic
from runtime.functions.js import JsResult, RunScriptBody
from runtime.functions.sandbox import (
    ListFilesArgs,
    ListFilesResult,
    PublishFilesArgs,
    PublishFilesResult,
    ReadFileArgs,
    ReadFileResult,
    RunCommandArgs,
    RunCommandResult,
    WriteFileArgs,
    WriteFileResult,
)
from runtime.tools.models import AgentConfig, UserInfo
from siesta_client._ops import Context, Op, args, model, raw_bytes


def _conv(conversation: str, rest: str = "") -> str:
    return f"/v1/conversations/{conversation}{rest}"


def run_command(
    ctx: Context,
    conversation: str,
    command: str,
    files: list[str] | None,
    timeout_seconds: int | None,
) -> Op[RunCommandResult]:
    body = args(RunCommandArgs, command=command, files=files, timeoutSeconds=timeout_seconds)
    return Op(
        "POST", _conv(conversation, "/sandbox/runCommand"), model(RunCommandResult),
        ctx.headers(), body,
    )  # fmt: skip


def write_file(ctx: Context, conversation: str, path: str, content: str) -> Op[WriteFileResult]:
    body = args(WriteFileArgs, path=path, content=content)
    path_ = _conv(conversation, "/sandbox/writeFile")
    return Op("POST", path_, model(WriteFileResult), ctx.headers(), body)


def read_file(
    ctx: Context, conversation: str, path: str, offset: int | None, max_bytes: int | None
) -> Op[ReadFileResult]:
    body = args(ReadFileArgs, path=path, offset=offset, maxBytes=max_bytes)
    path_ = _conv(conversation, "/sandbox/readFile")
    return Op("POST", path_, model(ReadFileResult), ctx.headers(), body)


def list_files(ctx: Context, conversation: str, path: str) -> Op[ListFilesResult]:
    body = args(ListFilesArgs, path=path)
    path_ = _conv(conversation, "/sandbox/listFiles")
    return Op("POST", path_, model(ListFilesResult), ctx.headers(), body)


def publish_files(ctx: Context, conversation: str, paths: list[str]) -> Op[PublishFilesResult]:
    body = args(PublishFilesArgs, paths=paths)
    path_ = _conv(conversation, "/sandbox/publishFiles")
    return Op("POST", path_, model(PublishFilesResult), ctx.headers(), body)


def run_js(
    ctx: Context, conversation: str, code: str, timeout_seconds: float | None
) -> Op[JsResult]:
    body = args(RunScriptBody, code=code, timeoutSeconds=timeout_seconds)
    return Op("POST", _conv(conversation, "/js"), model(JsResult), ctx.headers(), body)


def upload_file(
    ctx: Context, conversation: str, name: str, data: bytes, content_type: str
) -> Op[FilePublic]:
    files = {"file": (name, data, content_type)}
    path = _conv(conversation, "/files")
    return Op("POST", path, model(FilePublic), ctx.headers(), files=files)


def list_conversation_files(ctx: Context, conversation: str) -> Op[FilesPublic]:
    return Op("GET", _conv(conversation, "/files"), model(FilesPublic), ctx.headers())


def download_file(ctx: Context, conversation: str, file_id: str) -> Op[bytes]:
    return Op("GET", _conv(conversation, f"/files/{file_id}/content"), raw_bytes, ctx.headers())


def sandbox(ctx: Context, conversation: str) -> Op[SandboxPublic]:
    return Op("GET", _conv(conversation, "/sandbox"), model(SandboxPublic), ctx.headers())


def delete(ctx: Context, conversation: str) -> Op[ConversationDeleted]:
    return Op("DELETE", _conv(conversation), model(ConversationDeleted), ctx.headers())


def _wire(value: AgentConfig | UserInfo | dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return value.model_dump(mode="json", by_alias=True, exclude_unset=True)


def catalog(
    agent: AgentConfig | dict[str, Any], user: UserInfo | dict[str, Any]
) -> Op[CatalogPublic]:
    body = {"agent": _wire(agent), "user": _wire(user)}
    return Op("POST", "/v1/tools/catalog", model(CatalogPublic), {}, body)


def execute(
    org: str,
    conversation: str,
    agent: AgentConfig | dict[str, Any],
    user: UserInfo | dict[str, Any],
    function: str,
    arguments: dict[str, Any],
) -> Op[ExecutionOutcome]:
    body = {
        "conversationId": conversation,
        "agent": _wire(agent),
        "user": _wire(user),
        "function": function,
        "arguments": arguments,
    }
    headers = {"X-Siesta-Org": org}
    return Op("POST", "/v1/tools/execute", model(ExecutionOutcome), headers, body)


def decide(org: str, approval_id: str, approve: bool, by: str) -> Op[ExecutionOutcome]:
    body = {"decision": "approve" if approve else "deny", "by": by}
    headers = {"X-Siesta-Org": org}
    path = f"/v1/tools/approvals/{approval_id}"
    return Op("POST", path, model(ExecutionOutcome), headers, body)


def executions(org: str, **filters: Any) -> Op[ExecutionsPublic]:
    params = {name: value for name, value in filters.items() if value is not None}
    headers = {"X-Siesta-Org": org}
    return Op("GET", "/v1/tools/executions", model(ExecutionsPublic), headers, params=params)
