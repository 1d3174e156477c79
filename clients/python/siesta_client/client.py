"""The synchronous client: ``SiestaClient`` and its per-conversation scope.

Over 400 lines on purpose: one short method per route of the API (each a line that
hands ``_calls``' description of the route to the transport), grouped by the scope
a user holds (the client, a conversation); splitting them would split that one list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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
from siesta_client._follow import ProcessEvent, follow
from siesta_client._ops import Context, Op
from siesta_client._retry import RETRYABLE_STATUSES, Retries
from siesta_client._sending import Answer, build, configured, failure
from siesta_client._terminal import Terminal
from siesta_client.admin import Admin
from siesta_client.agents import Agents
from siesta_client.memory import MemoryBanks

T = TypeVar("T")
DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=5.0)


class SiestaClient:
    """A Siesta Runtime service at ``base_url`` (default: ``SIESTA_URL``), called with
    ``token`` (default: ``SIESTA_API_TOKEN``).

    Mutating calls carry an ``Idempotency-Key`` (one per call, the same for its
    retries); connection errors and 502/503 answers are retried per ``retries``,
    never the client's own read timeout (``ClientTimeout``). A call that may run long
    (a command's or a script's ``timeout_seconds``) waits that much longer than
    ``timeout``'s read timeout.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        retries: Retries | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retries = retries or Retries()
        base_url, token = configured(base_url, token)
        self._http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )
        self.tools = Tools(self)
        self.snapshots = Snapshots(self)
        self.agents = Agents(self)
        self.memory_banks = MemoryBanks(self)
        self.admin = Admin(self)

    def __enter__(self) -> SiestaClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def conversation(
        self,
        conversation: str,
        *,
        org: str,
        user: str,
        base_image: str | None = None,
        agent: str | None = None,
        sub_agents: list[str] | None = None,
    ) -> Conversation:
        """A conversation's sandbox and files, on behalf of ``user`` of ``org``."""
        sub = tuple(sub_agents) if sub_agents is not None else None
        return Conversation(self, conversation, Context(org, user, base_image, agent, sub))

    def call(self, op: Op[T], idempotency_key: str | None = None) -> T:
        """Send one call (with its retries) and read its answer; errors raise."""
        request = build(self._http, op, idempotency_key)
        attempt = 0
        while True:
            attempt += 1
            response: httpx.Response | None = None
            try:
                response = self._http.send(request, stream=True)
                try:
                    if response.status_code not in RETRYABLE_STATUSES or (
                        attempt >= self.retries.attempts
                    ):
                        return Answer(op, response).read()
                finally:
                    response.close()
            except httpx.TransportError as error:
                failed = failure(op, request, error, attempt, self.retries)
                if failed is not None:
                    raise failed from error
            time.sleep(self.retries.delay(attempt, response))


class Conversation:
    """One conversation: its sandbox functions, files and JavaScript."""

    def __init__(self, client: SiestaClient, conversation: str, context: Context) -> None:
        self.client = client
        self.id = conversation
        self.context = context

    def run_command(
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
        return self.client.call(op)

    def write_file(self, path: str, content: str) -> WriteFileResult:
        return self.client.call(_calls.write_file(self.context, self.id, path, content))

    def read_file(
        self, path: str, *, offset: int | None = None, max_bytes: int | None = None
    ) -> ReadFileResult:
        """One page from byte ``offset``; the next page starts at its ``nextOffset``."""
        return self.client.call(_calls.read_file(self.context, self.id, path, offset, max_bytes))

    def read_pages(self, path: str, *, max_bytes: int | None = None) -> Iterator[ReadFileResult]:
        """Every page of the file, in order."""
        offset: int | None = 0
        while offset is not None:
            page = self.read_file(path, offset=offset, max_bytes=max_bytes)
            yield page
            offset = page.nextOffset

    def list_files(self, path: str = ".") -> ListFilesResult:
        return self.client.call(_calls.list_files(self.context, self.id, path))

    def publish_files(self, paths: list[str]) -> PublishFilesResult:
        """Raises ``ApprovalRequired`` (with ``approval_id``) when a person must decide."""
        return self.client.call(_calls.publish_files(self.context, self.id, paths))

    def run_js(self, code: str, *, timeout_seconds: float | None = None) -> JsResult:
        return self.client.call(_calls.run_js(self.context, self.id, code, timeout_seconds))

    def upload_file(
        self, name: str, data: bytes, content_type: str = "application/octet-stream"
    ) -> FilePublic:
        return self.client.call(_calls.upload_file(self.context, self.id, name, data, content_type))

    def files(self) -> FilesPublic:
        return self.client.call(_calls.list_conversation_files(self.context, self.id))

    def download_file(self, file_id: str) -> bytes:
        return self.client.call(_calls.download_file(self.context, self.id, file_id))

    def sandbox(self) -> SandboxPublic:
        return self.client.call(_calls.sandbox(self.context, self.id))

    def metrics(self) -> SandboxMetricsPublic:
        """The sandbox's CPU, memory and disk now, read from outside it (a paused
        sandbox stays paused)."""
        return self.client.call(_calls.sandbox_metrics(self.context, self.id))

    def pause(self, *, keep_memory: bool = True) -> SandboxTierPublic:
        """Pause the sandbox now (``keep_memory=False``: stop it, its disk kept); the
        next call resumes it."""
        return self.client.call(_calls.pause_sandbox(self.context, self.id, keep_memory))

    def resume(self) -> SandboxTierPublic:
        return self.client.call(_calls.resume_sandbox(self.context, self.id))

    def port(self, port: int) -> PortAccessPublic:
        """Where the sandbox's ``port`` answers through the service, with a port token
        (``preview_url`` opens it in a browser, on an origin of its own, when the
        deployment has a preview domain) and whether anything listens on it now."""
        return self.client.call(_calls.port_access(self.context, self.id, port))

    def start_process(
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
        return self.client.call(
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

    def processes(self) -> ProcessList:
        return self.client.call(_calls.processes(self.context, self.id))

    def process(self, pid: int) -> ProcessPublic:
        """Whether it runs, how it ended, and the last of what it printed."""
        return self.client.call(_calls.process(self.context, self.id, pid))

    def follow_process(self, pid: int, *, start: int = 0) -> Iterator[ProcessEvent]:
        """Its output from offset ``start`` (0: the first byte the sandbox still keeps)
        as it comes, then how it ended (``ProcessEnded``). A stream cut short (an
        instance stopping, a broken connection) reads on from where it was through any
        instance: nothing is missed or repeated while the sandbox keeps it
        (``OutputGap`` says how much it no longer kept)."""
        op = _calls.process(self.context, self.id, pid)
        return follow(self.client._http, op, start, self.client.retries)

    def send_input(self, pid: int, data: str = "", *, eof: bool = False) -> None:
        self.client.call(_calls.process_input(self.context, self.id, pid, data, eof))

    def signal_process(self, pid: int, signal: Signal = "SIGTERM") -> None:
        self.client.call(_calls.signal_process(self.context, self.id, pid, signal))

    def open_terminal(
        self, *, cols: int = 80, rows: int = 24, user: str | None = None, cwd: str | None = None
    ) -> Terminal:
        """A login shell in a real terminal of ``cols`` by ``rows`` (as ``user``, in
        ``cwd``): ``read`` what it prints, ``write`` keys; ``detach`` leaves it running
        for ``attach_terminal``, ``close`` hangs it up."""
        params = {"cols": cols, "rows": rows, "user": user, "cwd": cwd}
        return self._terminal({name: value for name, value in params.items() if value is not None})

    def attach_terminal(self, pid: int, *, cols: int = 80, rows: int = 24) -> Terminal:
        """A terminal started earlier (through any instance), resized to ``cols`` by
        ``rows``; its last screenful is the first thing ``read`` returns."""
        return self._terminal({"pid": pid, "cols": cols, "rows": rows})

    def _terminal(self, params: dict[str, Any]) -> Terminal:
        path = _calls._conv(self.id, "/sandbox/terminal")
        client = self.client
        return Terminal.open(client._http, path, self.context, client.retries, params)

    def network(self) -> SandboxNetworkPublic:
        """The sandbox's network rules, the deployment's list they narrow, and what the
        egress proxy refused it."""
        return self.client.call(_calls.network(self.context, self.id))

    def set_network(
        self,
        *,
        allow: list[str] | None = None,
        deny: list[str] | None = None,
        internet: bool = True,
    ) -> SandboxNetworkPublic:
        """Replace the sandbox's network rules (only ever a narrowing of the deployment's
        list); they apply to its next connections, running processes' included."""
        return self.client.call(
            _calls.set_network(self.context, self.id, allow, deny or [], internet)
        )

    def stat(self, path: str, *, user: str | None = None) -> FsEntry:
        """What is at ``path`` anywhere in the sandbox (relative: to the workspace)."""
        return self.client.call(_calls.stat(self.context, self.id, path, user))

    def list_dir(self, path: str, *, depth: int = 1, user: str | None = None) -> FsEntries:
        return self.client.call(_calls.list_dir(self.context, self.id, path, depth, user))

    def make_dir(self, path: str, *, user: str | None = None) -> FsEntry:
        return self.client.call(_calls.make_dir(self.context, self.id, path, user))

    def move(self, source: str, destination: str, *, user: str | None = None) -> FsEntry:
        return self.client.call(_calls.move(self.context, self.id, source, destination, user))

    def remove(self, path: str, *, user: str | None = None) -> None:
        self.client.call(_calls.remove(self.context, self.id, path, user))

    def set_metadata(
        self, path: str, metadata: dict[str, str], *, user: str | None = None
    ) -> FsEntry:
        """Replace a file's metadata (``user.e2b.*`` xattrs, E2B's file metadata; ``{}``
        clears it); answers the file as it now is."""
        return self.client.call(_calls.set_metadata(self.context, self.id, path, metadata, user))

    def watch(
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
        return self.client.call(_calls.watch(self.context, self.id, path, options, user))

    def changes(self, watcher_id: str, *, wait_seconds: int = 0) -> FsChanges:
        """What changed since the last read (through any instance: each change is read
        once); ``wait_seconds``: wait up to that long for a first one."""
        return self.client.call(
            _calls.watcher_changes(self.context, self.id, watcher_id, wait_seconds)
        )

    def stop_watching(self, watcher_id: str) -> None:
        self.client.call(_calls.stop_watching(self.context, self.id, watcher_id))

    def delete(self) -> ConversationDeleted:
        """Tear down the sandbox and the files (``deleted: "pending"`` while busy)."""
        return self.client.call(_calls.delete(self.context, self.id))

    def snapshot(
        self, *, name: str | None = None, metadata: dict[str, str] | None = None
    ) -> SnapshotPublic:
        """Keep the sandbox's files (workspace and installed packages; not processes)."""
        return self.client.call(_calls.take_snapshot(self.context, self.id, name, metadata))

    def fork(self, conversation: str) -> ForkPublic:
        """A new conversation whose sandbox starts from this one's files as they are now."""
        return self.client.call(_calls.fork(self.context, self.id, conversation))

    def forks(self, conversations: list[str]) -> ForksPublic:
        """Several new conversations from this one's files as they are now, all from one
        snapshot (one freeze); each fork in the answer started or says why not."""
        return self.client.call(_calls.forks(self.context, self.id, conversations))

    def start_from_snapshot(self, snapshot_id: str) -> ConversationStarted:
        """Start this (new) conversation's sandbox from the snapshot."""
        op = _calls.start_from_snapshot(self.context, self.id, snapshot_id)
        return self.client.call(op)


class Tools:
    """The tool layer: catalog, execute, approvals, the executions log."""

    def __init__(self, client: SiestaClient) -> None:
        self.client = client

    def catalog(
        self,
        agent: AgentConfig | dict[str, Any],
        user: UserInfo | dict[str, Any],
        schema_mode: SchemaMode = "standard",
        *,
        org: str,
    ) -> CatalogPublic:
        """``schema_mode="strict"``: parameters in the strict form of function calling;
        ``org``: the agent's organization, whose own policies apply."""
        return self.client.call(_calls.catalog(agent, user, schema_mode, org=org))

    def execute(
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
        return self.client.call(op)

    def approvals(
        self, *, org: str, conversation: str | None = None, limit: int | None = None
    ) -> ApprovalsPublic:
        """Calls waiting for a decision (long texts cut; ``approval`` has them whole)."""
        return self.client.call(_calls.approvals(org, conversation, limit))

    def approval(self, approval_id: str, *, org: str) -> ApprovalPublic:
        """One call waiting for a decision, with the complete arguments it runs with."""
        return self.client.call(_calls.approval(org, approval_id))

    def decide(self, approval_id: str, *, org: str, approve: bool, by: str) -> ExecutionOutcome:
        return self.client.call(_calls.decide(org, approval_id, approve, by))

    def executions(
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
        return self.client.call(op)


class Snapshots:
    """An org's snapshots (taken, forked and started from through a conversation)."""

    def __init__(self, client: SiestaClient) -> None:
        self.client = client

    def list(self, *, org: str, conversation: str | None = None) -> SnapshotsPublic:
        return self.client.call(_calls.snapshots(org, conversation))

    def get(self, snapshot_id: str, *, org: str) -> SnapshotPublic:
        return self.client.call(_calls.snapshot(org, snapshot_id))

    def delete(self, snapshot_id: str, *, org: str) -> None:
        """Remove it; sandboxes started from it keep their own copies."""
        self.client.call(_calls.delete_snapshot(org, snapshot_id))
