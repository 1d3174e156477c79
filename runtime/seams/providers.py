"""Where sandboxes live: the provider's two seams.

``SandboxLifecycle`` creates, suspends, resumes, inspects, lists and destroys
*labelled* sandboxes; ``SandboxInside`` runs commands and moves files inside a
running one. A ``SandboxProvider`` holds one of each. Providers know nothing about
conversations, leases or HTTP: the session manager decides what to create and when.

Over 400 lines: it is the whole contract every provider implements (the two
protocols, their value types and documented semantics), which reads best in one file.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

# Where a sandbox's workspace is mounted: the path the public contract's paths are under.
from siesta_contract.text import WORKSPACE as WORKSPACE

from runtime.core.output import CapturedStream

DEPLOYMENT_LABEL = "siesta.deployment"
"""Ownership: set by the service when it creates a sandbox or workspace, never by an
image. Reconciliation and clean-up select by it (with this deployment's id), so a
container someone else starts from a Siesta image is never taken for ours."""
LEGACY_MANAGED_LABEL = "siesta.managed"
"""What versions before deployment ids selected by. Images built then carry it too, so
it proves nothing on its own; such sandboxes are still served through their session
records (which name them), and never removed on the strength of this label."""
POOL_LABEL = "siesta.pool"
"""On a warm-pool member: the catalog image it is ready for (no conversation yet)."""
ORG_LABEL = "siesta.org"
CONVERSATION_LABEL = "siesta.conversation"
SESSION_LABEL = "siesta.session"
IMAGE_LABEL = "siesta.image-id"
SNAPSHOT_LABEL = "siesta.snapshot"
"""On a snapshot's image (and so on every sandbox made from it): the snapshot's id."""
SNAPSHOT_DEPLOYMENT_LABEL = "siesta.snapshot-deployment"
"""On a snapshot's image: the deployment that took it (clean-up selects by it). Not
``DEPLOYMENT_LABEL``, which a container made from the image would inherit."""

PACKAGE_INSTALL_CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "SETUID",
    "SETGID",
    "KILL",
]
"""What root keeps inside a sandbox (all else is dropped): what installing packages
needs, changing file owners and modes (dpkg) and switching user (apt's _apt sandbox,
and the agent starting E2B processes as the sandbox's user); and signalling processes
of another user (the agent ending such a process when asked to)."""
STOP_GRACE_SECONDS = 5
"""How long a stopping sandbox gets: the agent ends every process group on SIGTERM
and exits within 2 s."""


class SandboxState(enum.StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    """Exited or dead: processes are gone."""
    MISSING = "missing"
    """The provider has no such sandbox (removed, or never existed)."""


@dataclass(frozen=True)
class SandboxSpec:
    """What to create: a container from ``image`` with a workspace volume."""

    session_id: str
    image: str
    labels: dict[str, str]
    workspace_size_mb: int | None = None
    """The catalog image's workspace size, over the deployment's (``None``: that one)."""
    runtime: str | None = None
    """The catalog image's OCI runtime (``runsc``: gVisor); ``None``: the engine's."""
    allow_setuid: bool = False
    """The catalog image's ``allow_setuid``: no ``no-new-privileges`` (sudo works)."""


@dataclass(frozen=True)
class SandboxInfo:
    sandbox_id: str
    state: SandboxState
    labels: dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    """Unix time the sandbox was created (0 when unknown)."""


@dataclass(frozen=True)
class WorkspaceInfo:
    """A workspace volume, listed on its own: it can outlive its sandbox."""

    name: str
    labels: dict[str, str]
    created_at: float


@dataclass(frozen=True)
class SnapshotArtifacts:
    """What a snapshot is made of on its provider: an image of the sandbox's root file
    system (its installed packages) and a copy of its workspace."""

    snapshot_id: str
    image: str
    """What a sandbox made from the snapshot runs (Docker: the base image under the
    layer's clone, or the committed image's tag where the layer has no disk)."""
    workspace: str
    """Where the workspace's copy is (Docker: its disk image file, or a folder)."""
    workspace_bytes: int = 0
    """The copy's apparent size (a disk image: the workspace's size)."""
    workspace_allocated_bytes: int = 0
    """What the copy occupies on the host (sparse, and shared when copied on write)."""
    image_bytes: int = 0
    """What the snapshot adds to its base image (the layer's clone, allocated; or the
    committed layer)."""
    layer: str = ""
    """Where a clone of the sandbox's writable layer is (Docker: its disk image file);
    then ``image`` is the base image that layer goes over, and nothing was committed."""
    copy_on_write: bool = False
    """Whether the copies are clones sharing blocks with their source (reflinks)."""


@dataclass(frozen=True)
class SnapshotLeftover:
    """A snapshot's image or workspace copy the provider holds, listed for clean-up."""

    snapshot_id: str
    created_at: float


@dataclass(frozen=True)
class DiskUsage:
    """One file system of a sandbox, as its host sees it (``statvfs``)."""

    used_bytes: int
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class SandboxUsage:
    """What a sandbox uses, read from outside it (its cgroup, its disks): no exec, and
    nothing woken up. ``None``: not known in the sandbox's state (a stopped sandbox
    has no processes, so no CPU, memory or pids to read)."""

    state: SandboxState
    cpu_limit: float
    """The cores it may use (its CPU quota)."""
    cpu_seconds: float | None = None
    """CPU time its processes used since it started (cumulative)."""
    memory_used_bytes: int | None = None
    """Memory in use, without the page cache the kernel can take back."""
    memory_cache_bytes: int | None = None
    memory_limit_bytes: int | None = None
    pids: int | None = None
    workspace: DiskUsage | None = None
    """``/mnt/work``'s file system (``None``: not mounted, or no file system of its own)."""
    root: DiskUsage | None = None
    """The writable layer's own file system, where it has one."""


OutputListener = Callable[[str, bytes], None]
"""(``"stdout"`` or ``"stderr"``, chunk): output while a command runs."""


@dataclass(frozen=True)
class ExecRequest:
    command: str
    timeout_seconds: int
    max_output_bytes: int
    kill_grace_seconds: int
    on_output: OutputListener | None = None
    """Called with output as it is produced (up to ``max_output_bytes`` per stream);
    the result keeps head and tail as always."""
    environment: dict[str, str] = field(default_factory=dict)
    """Variables added to the sandbox's own for this command (the egress proxy)."""
    request_id: int | None = None
    """The run's id in the sandbox (from the call's ``Idempotency-Key``): ``collect``
    finds the run by it later. ``None``: any."""


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: CapturedStream
    stderr: CapturedStream
    timed_out: bool
    duration_ms: int
    pressure: LimitPressure = field(default_factory=lambda: LimitPressure())
    """What the sandbox's limits did while the command ran (when the agent can say)."""


@dataclass(frozen=True)
class LimitPressure:
    """Read from the sandbox's cgroup and file systems when a command ends."""

    oom_kills: int = 0
    """Processes the kernel killed at the memory limit while the command ran."""
    pids_refusals: int = 0
    """Forks refused at the process limit while the command ran."""
    workspace_free_bytes: int | None = None
    root_free_bytes: int | None = None
    """Space left in /mnt/work and in the container's own file system (None: unknown)."""


@dataclass(frozen=True)
class ProcessSpec:
    """A process of its own in a sandbox (E2B's commands and terminals): it outlives
    the call that starts it, and is fed, signalled and waited for through its handle."""

    argv: list[str]
    timeout_seconds: int
    """Killed (SIGTERM, then SIGKILL after the grace) this long after it starts; 0: never."""
    max_output_bytes: int
    """Output streamed per stream; the rest is counted (0: no cap)."""
    kill_grace_seconds: int
    stdin: bool = False
    """Whether it reads what ``RunningProcess.write`` sends (else stdin is /dev/null)."""
    pty: tuple[int, int] | None = None
    """A terminal of (columns, rows) for stdin, stdout and stderr: its output comes as
    ``pty``, what ``write`` sends is typed into it."""
    ring_bytes: int = 0
    """Its recent output its agent keeps for any reader (a process of the service's
    tables: ``SIESTA_PROCESSES__RING_BYTES``; a watcher: its byte limit; a transfer:
    none)."""
    tag: str = ""
    """What the service says about it (at most ``MAX_PROCESS_TAG_BYTES``), kept with it
    in the sandbox: any instance that lists the sandbox's processes reads it back."""


MAX_PROCESS_TAG_BYTES = 1024
"""The agent's limit on a process's tag (images/siesta-agent/PROTOCOL.md)."""


@dataclass(frozen=True)
class ProcessEntry:
    """A process of its own in a sandbox, as the sandbox's agent keeps it (whichever
    service instance started it)."""

    pid: int
    running: bool
    exit_code: int
    """Meaningful once it is not running."""
    pty: bool
    tag: str
    first: int = 0
    """The offset of the oldest output its agent still keeps (output counted in bytes
    from its start, both streams together)."""
    end: int = 0
    """The offset its output has reached."""


@dataclass(frozen=True)
class OutputAt:
    """A chunk of a process's output and where it starts in its output (both streams
    counted together, from the process's start)."""

    offset: int
    stream: str
    data: bytes

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True)
class OutputLost:
    """Output the agent's ring no longer kept between the position asked for and what
    follows."""

    lost_bytes: int


@dataclass(frozen=True)
class OutputEnded:
    exit_code: int


OutputEvent = OutputAt | OutputLost | OutputEnded


class RunningProcess(Protocol):
    """A started ``ProcessSpec``. One thread calls ``wait``; the rest may come from any."""

    @property
    def pid(self) -> int:
        """Its pid inside the sandbox."""

    def write(self, data: bytes) -> None: ...

    def close_input(self) -> None: ...

    def signal(self, signo: int) -> None:
        """Send ``signo`` to its process group."""

    def kill(self) -> None:
        """SIGKILL to its process group."""

    def resize(self, columns: int, rows: int) -> None:
        """Its terminal's new size (a process without one: nothing happens)."""

    def wait(self, on_output: OutputListener) -> ExecResult:
        """Output to ``on_output`` as it comes, until it ends; then how it ended."""

    def close(self) -> None:
        """Stop following it without waiting (``wait`` does this itself)."""


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: str
    """``file``, ``directory``, ``symlink`` or ``other``."""
    size: int


@dataclass(frozen=True)
class DirListing:
    entries: list[DirEntry]
    """Sorted by name; at most the requested number."""
    total: int
    """How many entries the folder has."""


ByteSink = Callable[[bytes], None]


class SandboxLifecycle(Protocol):
    """A sandbox's life, as its engine runs it: made, suspended, resumed, made again
    around its workspace, removed, looked at and listed.

    Every provider implements this side its own way (``docker/lifecycle.py``,
    ``kubernetes/lifecycle.py``, ``fake.py``); what runs inside a sandbox is the other
    seam, ``SandboxInside``.
    """

    def ping(self) -> None:
        """Raise ``ProviderUnavailable`` when the engine cannot be reached."""

    def prepare_ahead(self) -> None:
        """Start making ahead what the next sandboxes will need (a serving instance
        calls it once; ``close`` stops it). Nothing, for an engine with nothing to
        prepare."""

    def sandbox_id_for(self, session_id: str) -> str:
        """The id a sandbox created for ``session_id`` has (or would have)."""

    def create(self, spec: SandboxSpec) -> str:
        """Create and start a sandbox with a fresh workspace; return its id.

        The id is derived from ``spec.session_id`` alone, so whatever a crashed
        call left behind can still be found and destroyed by it.
        """

    def recreate(self, spec: SandboxSpec) -> str:
        """Make the sandbox of ``spec.session_id`` again around its existing workspace and
        start it: whatever is left of the old one is removed, the workspace is kept as it
        is (``spec.workspace_size_mb`` is not used). Returns the (same) sandbox id."""

    def pause(self, sandbox_id: str) -> None:
        """Freeze every process; memory stays allocated."""

    def unpause(self, sandbox_id: str) -> None:
        """Thaw a paused sandbox."""

    def stop(self, sandbox_id: str) -> None:
        """Suspend: end every process, free memory, keep the workspace and the root disk."""

    def start(self, sandbox_id: str) -> None:
        """Start a stopped sandbox again (stopped on purpose, by its engine's restart, by a
        reboot: disks are attached again first). ``SandboxBroken`` when it cannot start
        any more (its image or writable layer is gone): ``recreate`` it."""

    def destroy(self, sandbox_id: str) -> None:
        """Remove the sandbox and its workspace; missing parts are not an error."""

    def inspect(self, sandbox_id: str) -> SandboxInfo:
        """The sandbox's state (``MISSING`` when it does not exist)."""

    def known_running(self, sandbox_id: str) -> bool:
        """True when the provider knows, without asking its engine, that the sandbox
        runs (its agent channel is open: the stream ends when the sandbox stops).
        False means "ask ``inspect``", not "not running"."""

    def workspace_exists(self, sandbox_id: str) -> bool:
        """Whether the sandbox's workspace (its volume, disk image or claim) still exists,
        with or without the sandbox around it."""

    def list_sandboxes(self) -> list[SandboxInfo]:
        """Every sandbox this deployment created (its deployment label and extra labels)."""

    def list_workspaces(self) -> list[WorkspaceInfo]:
        """Every workspace volume this deployment created (as ``list_sandboxes``)."""

    def snapshot(self, sandbox_id: str, snapshot_id: str) -> SnapshotArtifacts:
        """Keep the running (or paused) sandbox's root file system and workspace as they
        are now, as one consistent point; the sandbox runs on unchanged. Processes and
        memory are not kept. ``SnapshotsNotSupported`` where the engine cannot."""

    def memory_snapshot_refusal(self) -> str | None:
        """Why snapshots here cannot keep memory and processes; ``None`` where they can."""

    def create_from_snapshot(
        self, spec: SandboxSpec, artifacts: SnapshotArtifacts, *, consume: bool = False
    ) -> str:
        """As ``create``, but from the snapshot's image with a copy of its workspace
        (``spec.image`` and ``spec.workspace_size_mb`` are not used). ``consume``: the
        workspace copy becomes the new sandbox's own (no second copy; the snapshot is
        deleted afterwards)."""

    def delete_snapshot(self, snapshot_id: str) -> bool:
        """Remove the snapshot's workspace copy, and its image unless sandboxes made from
        it still use it (then False: clean-up removes it once they are gone)."""

    def list_snapshot_leftovers(self) -> list[SnapshotLeftover]:
        """Every snapshot image and workspace copy this deployment holds."""

    def usage(self, sandbox_id: str) -> SandboxUsage:
        """What the sandbox uses now, read from outside it: never an exec, never a resume
        (a paused sandbox stays paused). ``MetricsNotSupported`` where the provider
        cannot read it; state ``MISSING`` when there is no such sandbox."""

    def close(self) -> None:
        """Release connections and open channels (sandboxes stay as they are)."""


class SandboxInside(Protocol):
    """What happens inside a running sandbox: commands and workspace files.

    Implemented once, over the sandbox's agent channel (``agent/inside.py``), for every
    provider that can open one; Docker adds an engine exec for sandboxes made before
    the agent existed (``docker/inside.py``), and the fake runs host processes.
    Sandboxes are made, resumed and removed by the other seam, ``SandboxLifecycle``.
    """

    def warm(self, sandbox_id: str) -> None:
        """Make sure the sandbox's agent answers (its channel is open), so that a
        later operation does not wait for it."""

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        """Run ``bash -lc command`` in the workspace, with timeout and output caps.

        The timeout is enforced inside the sandbox and kills the command's whole
        process group. Output is capped while it is produced.
        """

    def collect(self, sandbox_id: str, request: ExecRequest) -> ExecResult | None:
        """The outcome of the run ``request.request_id`` started earlier (by this or
        another instance): waited for while it still runs, read back from the sandbox
        when it has ended. ``None`` when the sandbox knows no such run (it was never
        started there, the sandbox has restarted since, or the outcome is no longer kept).
        """

    def cancel_exec(self, sandbox_id: str) -> None:
        """Kill the command running in the sandbox (its whole process group), if any."""

    def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, sink: ByteSink, *, strict: bool = False
    ) -> int:
        """Stream the first ``max_bytes`` of the workspace file ``path`` into ``sink``.

        Returns the file's full size. ``strict``: refuse a larger file with
        ``TransferTooLarge`` before sending anything. ``path`` is relative to
        the workspace and resolved inside the sandbox without leaving it
        (``PathOutsideWorkspace``, ``FileMissing``, ``NotAFile``).
        """

    def write_file(
        self, sandbox_id: str, path: str, chunks: Iterable[bytes], max_bytes: int
    ) -> int:
        """Replace the workspace file ``path`` atomically, creating parent folders.

        Returns the bytes written; more than ``max_bytes`` is ``TransferTooLarge``
        and leaves the old file as it was.
        """

    def list_dir(self, sandbox_id: str, path: str, max_entries: int) -> DirListing:
        """One workspace folder, not recursive, sorted by name."""

    def start_process(self, sandbox_id: str, spec: ProcessSpec) -> RunningProcess:
        """Start a process of its own; returns once it runs (``SandboxUnavailable`` when
        the sandbox cannot run one: no agent, or one older than processes)."""

    def process_table(self, sandbox_id: str) -> list[ProcessEntry] | None:
        """The sandbox's processes of their own, running and recently ended, as its
        agent keeps them; ``None`` when this instance cannot ask (an agent older than
        protocol 3, or no channel of this instance's own to it): then only the
        processes this instance started are known here."""

    def follow_process(self, sandbox_id: str, entry: ProcessEntry) -> RunningProcess:
        """A handle on a process of the table that another instance (or an earlier
        channel) started: its output from ``entry.end`` on, its input, signals and end
        (``SandboxUnavailable`` where ``process_table`` is ``None``)."""

    def process_output(
        self, sandbox_id: str, entry: ProcessEntry, start: int
    ) -> list[tuple[str, bytes]]:
        """What the process printed from offset ``start`` to ``entry.end`` that its
        agent still keeps, as (stream, bytes) in order."""

    def stream_output(
        self, sandbox_id: str, entry: ProcessEntry, start: int, stop: threading.Event
    ) -> Iterator[OutputEvent]:
        """The process's output from offset ``start`` (what its ring no longer keeps:
        ``OutputLost`` first), as it comes, until it ends (``OutputEnded``) or ``stop``
        is set; for one reader, with its own position (a client resuming where it was,
        through any instance)."""

    def untaken_output(
        self, sandbox_id: str, entry: ProcessEntry
    ) -> tuple[int, list[tuple[int, bytes]]]:
        """What the process printed on stdout since its TAKE cursor, that its agent
        still keeps: (the bytes past the cursor its ring no longer keeps, its pieces with
        their offsets). Output read once by whichever instance asks next (a watcher's
        events)."""

    def take_output(self, sandbox_id: str, entry: ProcessEntry, upto: int) -> None:
        """Move the process's TAKE cursor up to ``upto`` (what was read and used)."""


class SandboxProvider:
    """A provider: the lifecycle of its sandboxes and what runs inside them, the two
    seams side by side. Sessions make, suspend and remove sandboxes through
    ``lifecycle``; the sandbox functions run commands and move files through
    ``inside``. A new provider implements a ``SandboxLifecycle`` and how to open a
    channel to a sandbox's agent, and reuses ``AgentInside`` (``agent/inside.py``).
    """

    def __init__(self, lifecycle: SandboxLifecycle, inside: SandboxInside) -> None:
        self.lifecycle = lifecycle
        self.inside = inside

    def ping(self) -> None:
        """Raise ``ProviderUnavailable`` when the engine cannot be reached."""
        self.lifecycle.ping()

    def close(self) -> None:
        """Release connections and channels (sandboxes stay as they are)."""
        self.lifecycle.close()
