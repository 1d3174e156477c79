"""Every call of the API as an ``Op``: what both clients send, and what they return.

Over 400 lines on purpose: one short function per route, a table both clients and the
contract test (``tests/clients/test_contract.py``) read as one; split by resource, the
test would have to gather it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from siesta_contract.agents import (
    AgentConfig,
    AgentRegistration,
    RegisteredAgentPublic,
    RegisteredAgentsPublic,
    UserInfo,
)
from siesta_contract.conversations import ConversationDeleted, SandboxPublic
from siesta_contract.files import FilePublic, FilesPublic
from siesta_contract.filesystem import (
    FsChanges,
    FsEntries,
    FsEntry,
    FsListArgs,
    FsMetadataArgs,
    FsMoveArgs,
    FsPathArgs,
    FsWatchArgs,
    FsWatcher,
)
from siesta_contract.functions.js import JsResult, RunScriptBody
from siesta_contract.functions.memory import AddedEntry
from siesta_contract.functions.sandbox import (
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
from siesta_contract.memory import (
    MemoryBankCreate,
    MemoryBankPublic,
    MemoryBanksPublic,
    MemoryEntryCreate,
)
from siesta_contract.metrics import SandboxMetricsPublic, SandboxPauseArgs, SandboxTierPublic
from siesta_contract.network import SandboxNetworkPublic, SandboxNetworkUpdate
from siesta_contract.ports import PortAccessPublic
from siesta_contract.processes import (
    ProcessInputArgs,
    ProcessList,
    ProcessPublic,
    ProcessSignalArgs,
    Signal,
    StartProcessArgs,
)
from siesta_contract.snapshots import (
    ConversationFromSnapshot,
    ConversationStarted,
    ForkCreate,
    ForkPublic,
    ForksCreate,
    ForksPublic,
    SnapshotCreate,
    SnapshotPublic,
    SnapshotsPublic,
)
from siesta_contract.tools import (
    ApprovalPublic,
    ApprovalsPublic,
    CatalogPublic,
    CatalogRequest,
    Decision,
    ExecuteRequest,
    ExecutionOutcome,
    ExecutionsPublic,
    SchemaMode,
)

from siesta_client._ops import Context, Op, args, model, no_content, raw_bytes


def _conv(conversation: str, rest: str = "") -> str:
    return f"/v1/conversations/{conversation}{rest}"


def run_command(
    ctx: Context,
    conversation: str,
    command: str,
    files: list[str] | None,
    timeout_seconds: int | None,
    *,
    on_stdout: Callable[[str], None] | None = None,
    on_stderr: Callable[[str], None] | None = None,
) -> Op[RunCommandResult]:
    """Streamed (its output as it comes) when either callback is given. Its caller
    going away stops it (api/routes/sandbox.py), streamed or not."""
    body = args(RunCommandArgs, command=command, files=files, timeoutSeconds=timeout_seconds)
    path = _conv(conversation, "/sandbox/runCommand")
    return Op(
        "POST",
        path,
        model(RunCommandResult),
        ctx.headers(),
        body,
        body=RunCommandArgs,
        runs_for=timeout_seconds,
        abandoned="stopped",
        events=_output_to(on_stdout, on_stderr),
    )


def _output_to(
    on_stdout: Callable[[str], None] | None, on_stderr: Callable[[str], None] | None
) -> Callable[[str, Any], None] | None:
    if on_stdout is None and on_stderr is None:
        return None

    def event(name: str, data: Any) -> None:
        sink = on_stdout if data.get("stream") == "stdout" else on_stderr
        if name == "output" and sink is not None:
            sink(str(data.get("text", "")))

    return event


def write_file(ctx: Context, conversation: str, path: str, content: str) -> Op[WriteFileResult]:
    body = args(WriteFileArgs, path=path, content=content)
    path_ = _conv(conversation, "/sandbox/writeFile")
    return Op("POST", path_, model(WriteFileResult), ctx.headers(), body, body=WriteFileArgs)


def read_file(
    ctx: Context, conversation: str, path: str, offset: int | None, max_bytes: int | None
) -> Op[ReadFileResult]:
    body = args(ReadFileArgs, path=path, offset=offset, maxBytes=max_bytes)
    path_ = _conv(conversation, "/sandbox/readFile")
    return Op("POST", path_, model(ReadFileResult), ctx.headers(), body, body=ReadFileArgs)


def list_files(ctx: Context, conversation: str, path: str) -> Op[ListFilesResult]:
    body = args(ListFilesArgs, path=path)
    path_ = _conv(conversation, "/sandbox/listFiles")
    return Op("POST", path_, model(ListFilesResult), ctx.headers(), body, body=ListFilesArgs)


def publish_files(ctx: Context, conversation: str, paths: list[str]) -> Op[PublishFilesResult]:
    body = args(PublishFilesArgs, paths=paths)
    path_ = _conv(conversation, "/sandbox/publishFiles")
    return Op("POST", path_, model(PublishFilesResult), ctx.headers(), body, body=PublishFilesArgs)


def run_js(
    ctx: Context, conversation: str, code: str, timeout_seconds: float | None
) -> Op[JsResult]:
    """Not streamed, its caller going away does not stop it: it ends by its timeout."""
    body = args(RunScriptBody, code=code, timeoutSeconds=timeout_seconds)
    path = _conv(conversation, "/js")
    read = model(JsResult)
    return Op("POST", path, read, ctx.headers(), body, body=RunScriptBody, runs_for=timeout_seconds)


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


def sandbox_metrics(ctx: Context, conversation: str) -> Op[SandboxMetricsPublic]:
    path = _conv(conversation, "/sandbox/metrics")
    return Op("GET", path, model(SandboxMetricsPublic), ctx.headers())


def pause_sandbox(ctx: Context, conversation: str, keep_memory: bool) -> Op[SandboxTierPublic]:
    body = args(SandboxPauseArgs, keepMemory=keep_memory)
    path = _conv(conversation, "/sandbox/pause")
    return Op("POST", path, model(SandboxTierPublic), ctx.headers(), body, body=SandboxPauseArgs)


def port_access(ctx: Context, conversation: str, port: int) -> Op[PortAccessPublic]:
    path = _conv(conversation, f"/sandbox/ports/{port}")
    return Op("GET", path, model(PortAccessPublic), ctx.headers())


def resume_sandbox(ctx: Context, conversation: str) -> Op[SandboxTierPublic]:
    path = _conv(conversation, "/sandbox/resume")
    return Op("POST", path, model(SandboxTierPublic), ctx.headers())


def delete(ctx: Context, conversation: str) -> Op[ConversationDeleted]:
    return Op("DELETE", _conv(conversation), model(ConversationDeleted), ctx.headers())


def catalog(
    agent: AgentConfig | dict[str, Any],
    user: UserInfo | dict[str, Any],
    schema_mode: SchemaMode = "standard",
    *,
    org: str,
) -> Op[CatalogPublic]:
    body = args(CatalogRequest, agent=agent, user=user, org=org)
    params = {"schemaMode": schema_mode}
    return Op(
        "POST",
        "/v1/tools/catalog",
        model(CatalogPublic),
        {},
        body,
        params=params,
        body=CatalogRequest,
    )


def execute(
    org: str,
    conversation: str,
    agent: AgentConfig | dict[str, Any],
    user: UserInfo | dict[str, Any],
    function: str,
    arguments: dict[str, Any],
) -> Op[ExecutionOutcome]:
    body = args(
        ExecuteRequest,
        conversationId=conversation,
        agent=agent,
        user=user,
        function=function,
        arguments=arguments,
    )
    headers = {"X-Siesta-Org": org}
    path = "/v1/tools/execute"
    runs_for = arguments.get("timeoutSeconds")  # runCommand's, or a script's
    if not isinstance(runs_for, int | float) or isinstance(runs_for, bool):
        runs_for = None
    read = model(ExecutionOutcome)
    return Op("POST", path, read, headers, body, body=ExecuteRequest, runs_for=runs_for)


def decide(org: str, approval_id: str, approve: bool, by: str) -> Op[ExecutionOutcome]:
    body = args(Decision, decision="approve" if approve else "deny", by=by)
    headers = {"X-Siesta-Org": org}
    path = f"/v1/tools/approvals/{approval_id}"
    return Op("POST", path, model(ExecutionOutcome), headers, body, body=Decision)


def approvals(org: str, conversation: str | None, limit: int | None) -> Op[ApprovalsPublic]:
    params = {
        name: value
        for name, value in {"conversationId": conversation, "limit": limit}.items()
        if value is not None
    }
    headers = {"X-Siesta-Org": org}
    return Op("GET", "/v1/tools/approvals", model(ApprovalsPublic), headers, params=params)


def approval(org: str, approval_id: str) -> Op[ApprovalPublic]:
    headers = {"X-Siesta-Org": org}
    return Op("GET", f"/v1/tools/approvals/{approval_id}", model(ApprovalPublic), headers)


def executions(org: str, **filters: Any) -> Op[ExecutionsPublic]:
    params = {name: value for name, value in filters.items() if value is not None}
    headers = {"X-Siesta-Org": org}
    return Op("GET", "/v1/tools/executions", model(ExecutionsPublic), headers, params=params)


def start_process(ctx: Context, conversation: str, **fields: Any) -> Op[ProcessPublic]:
    body = args(StartProcessArgs, **fields)
    path = _conv(conversation, "/sandbox/processes")
    return Op("POST", path, model(ProcessPublic), ctx.headers(), body, body=StartProcessArgs)


def processes(ctx: Context, conversation: str) -> Op[ProcessList]:
    return Op("GET", _conv(conversation, "/sandbox/processes"), model(ProcessList), ctx.headers())


def process(ctx: Context, conversation: str, pid: int) -> Op[ProcessPublic]:
    path = _conv(conversation, f"/sandbox/processes/{pid}")
    return Op("GET", path, model(ProcessPublic), ctx.headers())


def process_input(ctx: Context, conversation: str, pid: int, data: str, eof: bool) -> Op[None]:
    body = args(ProcessInputArgs, data=data, eof=eof)
    path = _conv(conversation, f"/sandbox/processes/{pid}/input")
    return Op("POST", path, no_content, ctx.headers(), body, body=ProcessInputArgs)


def signal_process(ctx: Context, conversation: str, pid: int, signal: Signal) -> Op[None]:
    body = args(ProcessSignalArgs, signal=signal)
    path = _conv(conversation, f"/sandbox/processes/{pid}/signal")
    return Op("POST", path, no_content, ctx.headers(), body, body=ProcessSignalArgs)


def _conversation_headers(ctx: Context) -> dict[str, str]:
    """The conversation's own headers (the network routes take no agent's)."""
    return {k: v for k, v in ctx.headers().items() if k in ("X-Siesta-Org", "X-Siesta-User")}


def network(ctx: Context, conversation: str) -> Op[SandboxNetworkPublic]:
    path = _conv(conversation, "/sandbox/network")
    return Op("GET", path, model(SandboxNetworkPublic), _conversation_headers(ctx))


def set_network(
    ctx: Context, conversation: str, allow: list[str] | None, deny: list[str], internet: bool
) -> Op[SandboxNetworkPublic]:
    body = args(SandboxNetworkUpdate, allow=allow, deny=deny, internet=internet)
    path = _conv(conversation, "/sandbox/network")
    return Op(
        "PUT",
        path,
        model(SandboxNetworkPublic),
        _conversation_headers(ctx),
        body,
        body=SandboxNetworkUpdate,
    )


def stat(ctx: Context, conversation: str, path: str, user: str | None) -> Op[FsEntry]:
    body = args(FsPathArgs, path=path, user=user)
    url = _conv(conversation, "/sandbox/fs/stat")
    return Op("POST", url, model(FsEntry), ctx.headers(), body, body=FsPathArgs)


def list_dir(
    ctx: Context, conversation: str, path: str, depth: int, user: str | None
) -> Op[FsEntries]:
    body = args(FsListArgs, path=path, depth=depth, user=user)
    url = _conv(conversation, "/sandbox/fs/list")
    return Op("POST", url, model(FsEntries), ctx.headers(), body, body=FsListArgs)


def make_dir(ctx: Context, conversation: str, path: str, user: str | None) -> Op[FsEntry]:
    body = args(FsPathArgs, path=path, user=user)
    url = _conv(conversation, "/sandbox/fs/mkdir")
    return Op("POST", url, model(FsEntry), ctx.headers(), body, body=FsPathArgs)


def move(
    ctx: Context, conversation: str, source: str, destination: str, user: str | None
) -> Op[FsEntry]:
    body = args(FsMoveArgs, source=source, destination=destination, user=user)
    url = _conv(conversation, "/sandbox/fs/move")
    return Op("POST", url, model(FsEntry), ctx.headers(), body, body=FsMoveArgs)


def remove(ctx: Context, conversation: str, path: str, user: str | None) -> Op[None]:
    body = args(FsPathArgs, path=path, user=user)
    url = _conv(conversation, "/sandbox/fs/remove")
    return Op("POST", url, no_content, ctx.headers(), body, body=FsPathArgs)


def set_metadata(
    ctx: Context, conversation: str, path: str, metadata: dict[str, str], user: str | None
) -> Op[FsEntry]:
    body = args(FsMetadataArgs, path=path, metadata=metadata, user=user)
    url = _conv(conversation, "/sandbox/fs/metadata")
    return Op("POST", url, model(FsEntry), ctx.headers(), body, body=FsMetadataArgs)


@dataclass(frozen=True)
class WatchOptions:
    recursive: bool = False
    include_entry: bool = False
    allow_network_mounts: bool = False


def watch(
    ctx: Context, conversation: str, path: str, options: WatchOptions, user: str | None
) -> Op[FsWatcher]:
    body = args(
        FsWatchArgs,
        path=path,
        recursive=options.recursive,
        includeEntry=options.include_entry,
        allowNetworkMounts=options.allow_network_mounts,
        user=user,
    )
    url = _conv(conversation, "/sandbox/fs/watchers")
    return Op("POST", url, model(FsWatcher), ctx.headers(), body, body=FsWatchArgs)


def watcher_changes(
    ctx: Context, conversation: str, watcher_id: str, wait_seconds: int
) -> Op[FsChanges]:
    url = _conv(conversation, f"/sandbox/fs/watchers/{watcher_id}")
    params = {"waitSeconds": wait_seconds}
    read = model(FsChanges)
    return Op("GET", url, read, ctx.headers(), params=params, runs_for=wait_seconds)


def stop_watching(ctx: Context, conversation: str, watcher_id: str) -> Op[None]:
    url = _conv(conversation, f"/sandbox/fs/watchers/{watcher_id}")
    return Op("DELETE", url, no_content, ctx.headers())


def take_snapshot(
    ctx: Context, conversation: str, name: str | None, metadata: dict[str, str] | None
) -> Op[SnapshotPublic]:
    body = args(SnapshotCreate, name=name, metadata=metadata)
    path = _conv(conversation, "/snapshots")
    return Op("POST", path, model(SnapshotPublic), ctx.headers(), body, body=SnapshotCreate)


def fork(ctx: Context, conversation: str, new_conversation: str) -> Op[ForkPublic]:
    body = args(ForkCreate, conversationId=new_conversation)
    path = _conv(conversation, "/fork")
    return Op("POST", path, model(ForkPublic), ctx.headers(), body, body=ForkCreate)


def forks(ctx: Context, conversation: str, new_conversations: list[str]) -> Op[ForksPublic]:
    body = args(ForksCreate, conversationIds=list(new_conversations))
    path = _conv(conversation, "/forks")
    return Op("POST", path, model(ForksPublic), ctx.headers(), body, body=ForksCreate)


def start_from_snapshot(
    ctx: Context, conversation: str, snapshot_id: str
) -> Op[ConversationStarted]:
    body = args(ConversationFromSnapshot, conversationId=conversation)
    path = f"/v1/snapshots/{snapshot_id}/conversations"
    # Who the new conversation is for; the agent's headers belong to conversation calls.
    headers = Context(ctx.org, ctx.user, ctx.base_image).headers()
    read = model(ConversationStarted)
    return Op("POST", path, read, headers, body, body=ConversationFromSnapshot)


def snapshots(org: str, conversation: str | None) -> Op[SnapshotsPublic]:
    params = {"conversationId": conversation} if conversation is not None else None
    headers = {"X-Siesta-Org": org}
    return Op("GET", "/v1/snapshots", model(SnapshotsPublic), headers, params=params)


def snapshot(org: str, snapshot_id: str) -> Op[SnapshotPublic]:
    headers = {"X-Siesta-Org": org}
    return Op("GET", f"/v1/snapshots/{snapshot_id}", model(SnapshotPublic), headers)


def delete_snapshot(org: str, snapshot_id: str) -> Op[None]:
    headers = {"X-Siesta-Org": org}
    return Op("DELETE", f"/v1/snapshots/{snapshot_id}", no_content, headers)


def register_agent(org: str, agent: AgentConfig | dict[str, Any]) -> Op[RegisteredAgentPublic]:
    given = (
        agent.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(agent, AgentConfig)
        else agent
    )
    body = args(AgentRegistration, **given)
    read = model(RegisteredAgentPublic)
    return Op("POST", "/v1/agents", read, {"X-Siesta-Org": org}, body, body=AgentRegistration)


def agents(org: str) -> Op[RegisteredAgentsPublic]:
    return Op("GET", "/v1/agents", model(RegisteredAgentsPublic), {"X-Siesta-Org": org})


def agent(org: str, agent_id: str) -> Op[RegisteredAgentPublic]:
    headers = {"X-Siesta-Org": org}
    return Op("GET", f"/v1/agents/{agent_id}", model(RegisteredAgentPublic), headers)


def delete_agent(org: str, agent_id: str) -> Op[None]:
    return Op("DELETE", f"/v1/agents/{agent_id}", no_content, {"X-Siesta-Org": org})


def create_memory_bank(
    org: str, name: str, type: str, description: str | None, mode: str | None
) -> Op[MemoryBankPublic]:
    body = args(MemoryBankCreate, name=name, type=type, description=description, mode=mode)
    headers = {"X-Siesta-Org": org}
    read = model(MemoryBankPublic)
    return Op("POST", "/v1/memory-banks", read, headers, body, body=MemoryBankCreate)


def memory_banks(org: str) -> Op[MemoryBanksPublic]:
    return Op("GET", "/v1/memory-banks", model(MemoryBanksPublic), {"X-Siesta-Org": org})


def memory_bank(org: str, bank_id: str) -> Op[MemoryBankPublic]:
    headers = {"X-Siesta-Org": org}
    return Op("GET", f"/v1/memory-banks/{bank_id}", model(MemoryBankPublic), headers)


def delete_memory_bank(org: str, bank_id: str) -> Op[None]:
    return Op("DELETE", f"/v1/memory-banks/{bank_id}", no_content, {"X-Siesta-Org": org})


def add_memory_entry(
    org: str, bank_id: str, key: str, content: str, speaker: str | None
) -> Op[AddedEntry]:
    body = args(MemoryEntryCreate, key=key, content=content, speaker=speaker)
    path = f"/v1/memory-banks/{bank_id}/entries"
    headers = {"X-Siesta-Org": org}
    return Op("POST", path, model(AddedEntry), headers, body, body=MemoryEntryCreate)
