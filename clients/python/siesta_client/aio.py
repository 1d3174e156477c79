"""The asynchronous client: ``AsyncSiestaClient``, the same calls as ``SiestaClient``.

Over 400 lines on purpose: one short method per route of the API (each a line that
hands ``_calls``' description of the route to the transport), grouped by the scope
a user holds (the client, a conversation); splitting them would split that one list.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import httpx

from siesta_contract.agents import AgentConfig, UserInfo
from siesta_contract.conversations import ConversationDeleted, SandboxPublic
from siesta_contract.files import FilePublic, FilesPublic
from siesta_contract.filesystem import FsChanges, FsEntries, FsEntry, FsWatcher
from siesta_contract.functions.js import JsResult
from siesta_contract.functions.sandbox import (
    ListFilesResult,
    PublishFilesResult,
    ReadFileResult,
    RunCommandResult,
    WriteFileResult,
)
from siesta_contract.metrics import SandboxMetricsPublic, SandboxTierPublic
from siesta_contract.network import SandboxNetworkPublic
from siesta_contract.ports import PortAccessPublic
from siesta_contract.processes import ProcessList, ProcessPublic, Signal
from siesta_contract.snapshots import (
    ConversationStarted,
    ForkPublic,
    ForksPublic,
    SnapshotPublic,
    SnapshotsPublic,
)
from siesta_contract.tools import (
    ApprovalPublic,
    ApprovalsPublic,
    CatalogPublic,
    ExecutionOutcome,
    ExecutionsPublic,
    SchemaMode,
)

from siesta_client import _calls
from siesta_client._ops import Context, Op
from siesta_client._retry import RETRYABLE_STATUSES, Retries
from siesta_client._sending import Answer, build, configured, failure
from siesta_client.admin import AsyncAdmin
from siesta_client.agents import AsyncAgents
from siesta_client.memory import AsyncMemoryBanks

T = TypeVar("T")
DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=5.0)


class AsyncSiestaClient:
    """A Siesta Runtime service at ``base_url`` (default: ``SIESTA_URL``), called with
    ``token`` (default: ``SIESTA_API_TOKEN``); retries and timeouts as ``SiestaClient``'s.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        retries: Retries | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retries = retries or Retries()
        base_url, token = configured(base_url, token)
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )
        self.tools = AsyncTools(self)
        self.snapshots = AsyncSnapshots(self)
        self.agents = AsyncAgents(self)
        self.memory_banks = AsyncMemoryBanks(self)
        self.admin = AsyncAdmin(self)

    async def __aenter__(self) -> AsyncSiestaClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def conversation(
        self,
        conversation: str,
        *,
        org: str,
        user: str,
        base_image: str | None = None,
        agent: str | None = None,
        sub_agents: list[str] | None = None,
    ) -> AsyncConversation:
        """A conversation's sandbox and files, on behalf of ``user`` of ``org``."""
        sub = tuple(sub_agents) if sub_agents is not None else None
        return AsyncConversation(self, conversation, Context(org, user, base_image, agent, sub))

    async def call(self, op: Op[T], idempotency_key: str | None = None) -> T:
        """Send one call (with its retries) and read its answer; errors raise."""
        request = build(self._http, op, idempotency_key)
        attempt = 0
        while True:
            attempt += 1
            response: httpx.Response | None = None
            try:
                response = await self._http.send(request, stream=True)
                try:
                    if response.status_code not in RETRYABLE_STATUSES or (
                        attempt >= self.retries.attempts
                    ):
                        return await Answer(op, response).aread()
                finally:
                    await response.aclose()
            except httpx.TransportError as error:
                failed = failure(op, request, error, attempt, self.retries)
                if failed is not None:
                    raise failed from error
            await asyncio.sleep(self.retries.delay(attempt, response))


class AsyncConversation:
    """One conversation: its sandbox functions, files and JavaScript."""

    def __init__(self, client: AsyncSiestaClient, conversation: str, context: Context) -> None:
        self.client = client
        self.id = conversation
        self.context = context

    async def run_command(
        self,
        command: str,
        *,
        files: list[str] | None = None,
        timeout_seconds: int | None = None,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> RunCommandResult:
        """``bash -lc command`` in /mnt/work; a nonzero exit is a result, not an error.
        Awaited ``timeout_seconds`` longer than the read timeout; ``on_stdout`` and
        ``on_stderr`` get its output as it comes; ``ClientTimeout``: it was stopped."""
        op = _calls.run_command(
            self.context,
            self.id,
            command,
            files,
            timeout_seconds,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
        )
        return await self.client.call(op)

    async def write_file(self, path: str, content: str) -> WriteFileResult:
        return await self.client.call(_calls.write_file(self.context, self.id, path, content))

    async def read_file(
        self, path: str, *, offset: int | None = None, max_bytes: int | None = None
    ) -> ReadFileResult:
        """One page from byte ``offset``; the next page starts at its ``nextOffset``."""
        return await self.client.call(
            _calls.read_file(self.context, self.id, path, offset, max_bytes)
        )

    async def read_pages(
        self, path: str, *, max_bytes: int | None = None
    ) -> AsyncIterator[ReadFileResult]:
        """Every page of the file, in order."""
        offset: int | None = 0
        while offset is not None:
            page = await self.read_file(path, offset=offset, max_bytes=max_bytes)
            yield page
            offset = page.nextOffset

    async def list_files(self, path: str = ".") -> ListFilesResult:
        return await self.client.call(_calls.list_files(self.context, self.id, path))

    async def publish_files(self, paths: list[str]) -> PublishFilesResult:
        """Raises ``ApprovalRequired`` (with ``approval_id``) when a person must decide."""
        return await self.client.call(_calls.publish_files(self.context, self.id, paths))

    async def run_js(self, code: str, *, timeout_seconds: float | None = None) -> JsResult:
        return await self.client.call(_calls.run_js(self.context, self.id, code, timeout_seconds))

    async def upload_file(
        self, name: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> FilePublic:
        return await self.client.call(
            _calls.upload_file(self.context, self.id, name, data, content_type)
        )

    async def files(self) -> FilesPublic:
        return await self.client.call(_calls.list_conversation_files(self.context, self.id))

    async def download_file(self, file_id: str) -> bytes:
        return await self.client.call(_calls.download_file(self.context, self.id, file_id))

    async def sandbox(self) -> SandboxPublic:
        return await self.client.call(_calls.sandbox(self.context, self.id))

    async def metrics(self) -> SandboxMetricsPublic:
        """The sandbox's CPU, memory and disk now, read from outside it (a paused
        sandbox stays paused)."""
        return await self.client.call(_calls.sandbox_metrics(self.context, self.id))

    async def pause(self, *, keep_memory: bool = True) -> SandboxTierPublic:
        """Pause the sandbox now (``keep_memory=False``: stop it, its disk kept); the
        next call resumes it."""
        return await self.client.call(_calls.pause_sandbox(self.context, self.id, keep_memory))

    async def resume(self) -> SandboxTierPublic:
        return await self.client.call(_calls.resume_sandbox(self.context, self.id))

    async def port(self, port: int) -> PortAccessPublic:
        """Where the sandbox's ``port`` answers through the service, with a port token
        (``preview_url`` opens it in a browser, on an origin of its own, when the
        deployment has a preview domain) and whether anything listens on it now."""
        return await self.client.call(_calls.port_access(self.context, self.id, port))

    async def start_process(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout_seconds: int | None = None,
        tag: str | None = None,
        stdin: bool = False,
    ) -> ProcessPublic:
        """Start ``bash -lc command``; it keeps running after this call (a server, a
        watcher): read it with ``process``, feed it with ``send_input``, end it with
        ``signal_process``."""
        return await self.client.call(
            _calls.start_process(
                self.context,
                self.id,
                command=command,
                cwd=cwd,
                env=env,
                user=user,
                timeoutSeconds=timeout_seconds,
                tag=tag,
                stdin=stdin,
            )
        )

    async def processes(self) -> ProcessList:
        return await self.client.call(_calls.processes(self.context, self.id))

    async def process(self, pid: int) -> ProcessPublic:
        """Whether it runs, how it ended, and the last of what it printed."""
        return await self.client.call(_calls.process(self.context, self.id, pid))

    async def send_input(self, pid: int, data: str = "", *, eof: bool = False) -> None:
        await self.client.call(_calls.process_input(self.context, self.id, pid, data, eof))

    async def signal_process(self, pid: int, signal: Signal = "SIGTERM") -> None:
        await self.client.call(_calls.signal_process(self.context, self.id, pid, signal))

    async def network(self) -> SandboxNetworkPublic:
        """The sandbox's network rules, the deployment's list they narrow, and what the
        egress proxy refused it."""
        return await self.client.call(_calls.network(self.context, self.id))

    async def set_network(
        self,
        *,
        allow: list[str] | None = None,
        deny: list[str] | None = None,
        internet: bool = True,
    ) -> SandboxNetworkPublic:
        """Replace the sandbox's network rules (only ever a narrowing of the deployment's
        list); they apply to its next connections, running processes' included."""
        return await self.client.call(
            _calls.set_network(self.context, self.id, allow, deny or [], internet)
        )

    async def stat(self, path: str, *, user: str | None = None) -> FsEntry:
        """What is at ``path`` anywhere in the sandbox (relative: to the workspace)."""
        return await self.client.call(_calls.stat(self.context, self.id, path, user))

    async def list_dir(self, path: str, *, depth: int = 1, user: str | None = None) -> FsEntries:
        return await self.client.call(_calls.list_dir(self.context, self.id, path, depth, user))

    async def make_dir(self, path: str, *, user: str | None = None) -> FsEntry:
        return await self.client.call(_calls.make_dir(self.context, self.id, path, user))

    async def move(self, source: str, destination: str, *, user: str | None = None) -> FsEntry:
        return await self.client.call(_calls.move(self.context, self.id, source, destination, user))

    async def remove(self, path: str, *, user: str | None = None) -> None:
        await self.client.call(_calls.remove(self.context, self.id, path, user))

    async def set_metadata(
        self, path: str, metadata: dict[str, str], *, user: str | None = None
    ) -> FsEntry:
        """Replace a file's metadata (``user.e2b.*`` xattrs, E2B's file metadata; ``{}``
        clears it); answers the file as it now is."""
        return await self.client.call(
            _calls.set_metadata(self.context, self.id, path, metadata, user)
        )

    async def watch(
        self,
        path: str,
        *,
        recursive: bool = False,
        include_entry: bool = False,
        allow_network_mounts: bool = False,
        user: str | None = None,
    ) -> FsWatcher:
        """Keep the changes of a folder from now on, until read (``changes``); any
        instance of the service serves it. Stop it with ``stop_watching``.
        ``include_entry``: each change comes with what is at its name;
        ``allow_network_mounts``: a folder on NFS, CIFS, SMB or FUSE may be watched."""
        options = _calls.WatchOptions(recursive, include_entry, allow_network_mounts)
        return await self.client.call(_calls.watch(self.context, self.id, path, options, user))

    async def changes(self, watcher_id: str, *, wait_seconds: int = 0) -> FsChanges:
        """What changed since the last read (through any instance: each change is read
        once); ``wait_seconds``: wait up to that long for a first one."""
        return await self.client.call(
            _calls.watcher_changes(self.context, self.id, watcher_id, wait_seconds)
        )

    async def stop_watching(self, watcher_id: str) -> None:
        await self.client.call(_calls.stop_watching(self.context, self.id, watcher_id))

    async def delete(self) -> ConversationDeleted:
        """Tear down the sandbox and the files (``deleted: "pending"`` while busy)."""
        return await self.client.call(_calls.delete(self.context, self.id))

    async def snapshot(
        self, *, name: str | None = None, metadata: dict[str, str] | None = None
    ) -> SnapshotPublic:
        """Keep the sandbox's files (workspace and installed packages; not processes)."""
        return await self.client.call(_calls.take_snapshot(self.context, self.id, name, metadata))

    async def fork(self, conversation: str) -> ForkPublic:
        """A new conversation whose sandbox starts from this one's files as they are now."""
        return await self.client.call(_calls.fork(self.context, self.id, conversation))

    async def forks(self, conversations: list[str]) -> ForksPublic:
        """Several new conversations from this one's files as they are now, all from one
        snapshot (one freeze); each fork in the answer started or says why not."""
        return await self.client.call(_calls.forks(self.context, self.id, conversations))

    async def start_from_snapshot(self, snapshot_id: str) -> ConversationStarted:
        """Start this (new) conversation's sandbox from the snapshot."""
        op = _calls.start_from_snapshot(self.context, self.id, snapshot_id)
        return await self.client.call(op)


class AsyncTools:
    """The tool layer: catalog, execute, approvals, the executions log."""

    def __init__(self, client: AsyncSiestaClient) -> None:
        self.client = client

    async def catalog(
        self,
        agent: AgentConfig | dict[str, Any],
        user: UserInfo | dict[str, Any],
        schema_mode: SchemaMode = "standard",
        *,
        org: str,
    ) -> CatalogPublic:
        """``schema_mode="strict"``: parameters in the strict form of function calling;
        ``org``: the agent's organization, whose own policies apply."""
        return await self.client.call(_calls.catalog(agent, user, schema_mode, org=org))

    async def execute(
        self,
        *,
        org: str,
        conversation: str,
        agent: AgentConfig | dict[str, Any],
        user: UserInfo | dict[str, Any],
        function: str,
        arguments: dict[str, Any] | None = None,
    ) -> ExecutionOutcome:
        """A function call as the model made it; failures are outcomes (``ok: false``)."""
        op = _calls.execute(org, conversation, agent, user, function, arguments or {})
        return await self.client.call(op)

    async def approvals(
        self, *, org: str, conversation: str | None = None, limit: int | None = None
    ) -> ApprovalsPublic:
        """Calls waiting for a decision (long texts cut; ``approval`` has them whole)."""
        return await self.client.call(_calls.approvals(org, conversation, limit))

    async def approval(self, approval_id: str, *, org: str) -> ApprovalPublic:
        """One call waiting for a decision, with the complete arguments it runs with."""
        return await self.client.call(_calls.approval(org, approval_id))

    async def decide(
        self, approval_id: str, *, org: str, approve: bool, by: str
    ) -> ExecutionOutcome:
        return await self.client.call(_calls.decide(org, approval_id, approve, by))

    async def executions(
        self,
        *,
        org: str,
        conversation: str | None = None,
        function: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> ExecutionsPublic:
        op = _calls.executions(
            org, conversationId=conversation, function=function, status=status, limit=limit
        )
        return await self.client.call(op)


class AsyncSnapshots:
    """An org's snapshots (taken, forked and started from through a conversation)."""

    def __init__(self, client: AsyncSiestaClient) -> None:
        self.client = client

    async def list(self, *, org: str, conversation: str | None = None) -> SnapshotsPublic:
        return await self.client.call(_calls.snapshots(org, conversation))

    async def get(self, snapshot_id: str, *, org: str) -> SnapshotPublic:
        return await self.client.call(_calls.snapshot(org, snapshot_id))

    async def delete(self, snapshot_id: str, *, org: str) -> None:
        """Remove it; sandboxes started from it keep their own copies."""
        await self.client.call(_calls.delete_snapshot(org, snapshot_id))
