"""A provider that runs commands on the host, one temp folder per sandbox.

Both seams, faked: ``FakeLifecycle`` keeps sandbox states in memory, ``FakeInside``
runs commands as host processes in the sandbox's folder.

For fast API-level tests only: there is no isolation at all. It keeps the
provider contract (timeout kills the process group, output capped while it is
produced) so tests written against it mean something; every behaviour is also
tested against Docker.

Over 400 lines: it fakes both seams whole (lifecycle, commands, files, processes,
snapshots), so that API tests meet the same contract as the real providers.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NoReturn

from runtime.core.errors import ProvisioningFailed, SandboxBroken, SandboxUnavailable
from runtime.core.output import HeadTailBuffer
from runtime.providers.agent import fshelper
from runtime.providers.base import (
    ByteSink,
    DirEntry,
    DirListing,
    DiskUsage,
    ExecRequest,
    ExecResult,
    OutputEvent,
    ProcessEntry,
    ProcessSpec,
    RunningProcess,
    SandboxInfo,
    SandboxProvider,
    SandboxSpec,
    SandboxState,
    SandboxUsage,
    SnapshotArtifacts,
    SnapshotLeftover,
    WorkspaceInfo,
)

KEPT_RESULTS = 16


class FakeProcesses:
    """The host processes running in each fake sandbox (both seams end them)."""

    def __init__(self) -> None:
        self._running: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def add(self, sandbox_id: str, pid: int) -> None:
        with self._lock:
            self._running.setdefault(sandbox_id, set()).add(pid)

    def discard(self, sandbox_id: str, pid: int) -> None:
        with self._lock:
            self._running.get(sandbox_id, set()).discard(pid)

    def kill(self, sandbox_id: str) -> None:
        """Kill every process group running in the sandbox."""
        with self._lock:
            running = list(self._running.get(sandbox_id, ()))
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


class FakeLifecycle:
    """The lifecycle of fake sandboxes (``SandboxLifecycle``): a folder each, and
    states kept in memory."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(tempfile.mkdtemp(prefix="siesta-fake-"))
        self.processes = FakeProcesses()
        self._labels: dict[str, dict[str, str]] = {}
        self._stopped: set[str] = set()
        self._paused: set[str] = set()
        self.broken: set[str] = set()
        """Sandboxes whose ``start`` fails as a sandbox whose image is gone would (tests)."""
        self._lock = threading.Lock()

    def ping(self) -> None:
        return None

    def sandbox_id_for(self, session_id: str) -> str:
        return f"fake-{session_id}"

    def create(self, spec: SandboxSpec) -> str:
        sandbox_id = self.sandbox_id_for(spec.session_id)
        (self.root / sandbox_id).mkdir(parents=True)
        with self._lock:
            self._labels[sandbox_id] = dict(spec.labels)
        return sandbox_id

    def recreate(self, spec: SandboxSpec) -> str:
        """The sandbox again around its folder (the fake's workspace)."""
        sandbox_id = self.sandbox_id_for(spec.session_id)
        self.processes.kill(sandbox_id)
        (self.root / sandbox_id).mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._labels[sandbox_id] = dict(spec.labels)
            self._stopped.discard(sandbox_id)
            self._paused.discard(sandbox_id)
            self.broken.discard(sandbox_id)
        return sandbox_id

    def workspace_exists(self, sandbox_id: str) -> bool:
        return (self.root / sandbox_id).is_dir()

    def remove_sandbox_only(self, sandbox_id: str) -> None:
        """What ``docker rm`` does to a Docker sandbox: the workspace stays (for tests)."""
        with self._lock:
            self._labels.pop(sandbox_id, None)

    def known_running(self, sandbox_id: str) -> bool:
        return False  # the fake has no channel: always ask

    def inspect(self, sandbox_id: str) -> SandboxInfo:
        with self._lock:
            labels = self._labels.get(sandbox_id)
            stopped = sandbox_id in self._stopped
            paused = sandbox_id in self._paused
        if labels is None or not (self.root / sandbox_id).is_dir():
            return SandboxInfo(sandbox_id, SandboxState.MISSING)
        state = (
            SandboxState.STOPPED
            if stopped
            else SandboxState.PAUSED
            if paused
            else SandboxState.RUNNING
        )
        return SandboxInfo(sandbox_id, state, labels)

    def usage(self, sandbox_id: str) -> SandboxUsage:
        """No cgroup here: no CPU or memory used; the folder's files are the disk used."""
        state = self.inspect(sandbox_id).state
        if state in (SandboxState.MISSING, SandboxState.STOPPED):
            return SandboxUsage(state, cpu_limit=1.0)
        folder = self.root / sandbox_id
        used = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        disk = os.statvfs(folder)
        total = disk.f_blocks * disk.f_frsize
        workspace = DiskUsage(used, total, disk.f_bavail * disk.f_frsize)
        return SandboxUsage(state, 1.0, 0.0, 0, 0, None, 1, workspace)

    def pause(self, sandbox_id: str) -> None:
        with self._lock:
            self._paused.add(sandbox_id)

    def unpause(self, sandbox_id: str) -> None:
        with self._lock:
            self._paused.discard(sandbox_id)

    def stop(self, sandbox_id: str) -> None:
        self.processes.kill(sandbox_id)
        with self._lock:
            self._stopped.add(sandbox_id)

    def start(self, sandbox_id: str) -> None:
        with self._lock:
            if sandbox_id in self.broken:
                msg = f"the sandbox {sandbox_id} cannot be started any more (test)"
                raise SandboxBroken(msg)
            self._stopped.discard(sandbox_id)

    def destroy(self, sandbox_id: str) -> None:
        with self._lock:
            self._labels.pop(sandbox_id, None)
        shutil.rmtree(self.root / sandbox_id, ignore_errors=True)

    def list_sandboxes(self) -> list[SandboxInfo]:
        with self._lock:
            ids = list(self._labels)
        return [self.inspect(sandbox_id) for sandbox_id in ids]

    def list_workspaces(self) -> list[WorkspaceInfo]:
        with self._lock:
            return [WorkspaceInfo(i, dict(labels), 0.0) for i, labels in self._labels.items()]

    def memory_snapshot_refusal(self) -> str | None:
        return "the fake provider's sandboxes are folders: they have no memory to keep"

    def snapshot(self, sandbox_id: str, snapshot_id: str) -> SnapshotArtifacts:
        """The sandbox's folder copied (the fake has no root file system of its own)."""
        if self.inspect(sandbox_id).state not in (SandboxState.RUNNING, SandboxState.PAUSED):
            msg = f"the sandbox {sandbox_id} is not running"
            raise SandboxUnavailable(msg)
        copy = self._snapshots / snapshot_id
        shutil.copytree(self.root / sandbox_id, copy, symlinks=True)
        size = sum(p.stat().st_size for p in copy.rglob("*") if p.is_file())
        return SnapshotArtifacts(snapshot_id, f"fake-snapshot:{snapshot_id}", str(copy), size, size)

    def create_from_snapshot(
        self, spec: SandboxSpec, artifacts: SnapshotArtifacts, *, consume: bool = False
    ) -> str:
        sandbox_id = self.sandbox_id_for(spec.session_id)
        source = Path(artifacts.workspace)
        if not source.is_dir():
            msg = f"the snapshot {artifacts.snapshot_id} has no workspace copy any more"
            raise ProvisioningFailed(msg)
        if consume:
            source.rename(self.root / sandbox_id)
        else:
            shutil.copytree(source, self.root / sandbox_id, symlinks=True)
        with self._lock:
            self._labels[sandbox_id] = dict(spec.labels)
        return sandbox_id

    def delete_snapshot(self, snapshot_id: str) -> bool:
        shutil.rmtree(self._snapshots / snapshot_id, ignore_errors=True)
        return True

    def list_snapshot_leftovers(self) -> list[SnapshotLeftover]:
        if not self._snapshots.is_dir():
            return []
        return [SnapshotLeftover(p.name, p.stat().st_mtime) for p in self._snapshots.iterdir()]

    @property
    def _snapshots(self) -> Path:
        return self.root / ".snapshots"

    def prepare_ahead(self) -> None:
        """Nothing to make ahead."""

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class FakeInside:
    """Commands as host processes in the sandbox's folder, files in it
    (``SandboxInside``)."""

    def __init__(self, root: Path, processes: FakeProcesses) -> None:
        self._root = root
        self._processes = processes
        self._results: dict[tuple[str, int | None], ExecResult] = {}
        self._lock = threading.Lock()

    def warm(self, sandbox_id: str) -> None:
        """Nothing to start: the fake runs commands as host processes."""

    def cancel_exec(self, sandbox_id: str) -> None:
        self._processes.kill(sandbox_id)

    def collect(self, sandbox_id: str, request: ExecRequest) -> ExecResult | None:
        """The fake's runs are host processes of this instance: it knows those it ran."""
        with self._lock:
            return self._results.get((sandbox_id, request.request_id))

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        result = self._run(sandbox_id, request)
        if request.request_id is not None:
            with self._lock:
                self._results[(sandbox_id, request.request_id)] = result
                if len(self._results) > KEPT_RESULTS:  # as the agent, only the latest
                    del self._results[next(iter(self._results))]
        return result

    def _run(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        started = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "-c", request.command],
            cwd=self._root / sandbox_id,
            env={**os.environ, **request.environment},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        self._processes.add(sandbox_id, proc.pid)
        try:
            return _collect(proc, request, started)
        finally:
            self._processes.discard(sandbox_id, proc.pid)

    def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, sink: ByteSink, *, strict: bool = False
    ) -> int:
        return self._workspace(sandbox_id).read(path, max_bytes, sink, strict)

    def write_file(
        self, sandbox_id: str, path: str, chunks: Iterable[bytes], max_bytes: int
    ) -> int:
        return self._workspace(sandbox_id).write(path, chunks, max_bytes)

    def list_dir(self, sandbox_id: str, path: str, max_entries: int) -> DirListing:
        return self._workspace(sandbox_id).list(path, max_entries)

    def start_process(self, sandbox_id: str, spec: ProcessSpec) -> RunningProcess:
        """The fake serves the API layer's tests; processes of their own need a real
        sandbox (Docker or Kubernetes)."""
        msg = "the fake provider runs no processes of their own"
        raise SandboxUnavailable(msg)

    def process_table(self, sandbox_id: str) -> list[ProcessEntry] | None:
        return None

    def follow_process(self, sandbox_id: str, entry: ProcessEntry) -> RunningProcess:
        msg = "the fake provider runs no processes of their own"
        raise SandboxUnavailable(msg)

    def process_output(
        self, sandbox_id: str, entry: ProcessEntry, start: int
    ) -> list[tuple[str, bytes]]:
        return []

    def stream_output(
        self, sandbox_id: str, entry: ProcessEntry, start: int, stop: threading.Event
    ) -> Iterator[OutputEvent]:
        msg = "the fake provider runs no processes of their own"
        raise SandboxUnavailable(msg)

    def untaken_output(
        self, sandbox_id: str, entry: ProcessEntry
    ) -> tuple[int, list[tuple[int, bytes]]]:
        return 0, []

    def take_output(self, sandbox_id: str, entry: ProcessEntry, upto: int) -> None:
        return None

    def _workspace(self, sandbox_id: str) -> _FakeWorkspace:
        return _FakeWorkspace(self._root / sandbox_id)


class FakeProvider(SandboxProvider):
    """Fake sandboxes: ``FakeLifecycle`` and ``FakeInside`` on one folder per sandbox."""

    lifecycle: FakeLifecycle
    inside: FakeInside

    def __init__(self, root: Path | None = None, *, lifecycle: FakeLifecycle | None = None) -> None:
        """``lifecycle``: a test's own (one that is slow or fails), instead of one on ``root``."""
        lifecycle = lifecycle or FakeLifecycle(root)
        super().__init__(lifecycle, FakeInside(lifecycle.root, lifecycle.processes))


def _collect(proc: subprocess.Popen[bytes], request: ExecRequest, started: float) -> ExecResult:
    assert proc.stdout is not None and proc.stderr is not None
    stdout = HeadTailBuffer(request.max_output_bytes)
    stderr = HeadTailBuffer(request.max_output_bytes)
    sinks = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
    names = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
    deadline = started + request.timeout_seconds
    timed_out = False
    while sinks:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            break
        ready, _, _ = select.select(list(sinks), [], [], remaining)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                sinks[fd].write(chunk)
                if request.on_output is not None:
                    request.on_output(names[fd], chunk)
            else:
                del sinks[fd]
    exit_code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    duration_ms = int((time.monotonic() - started) * 1000)
    return ExecResult(
        124 if timed_out else exit_code,
        stdout.result(),
        stderr.result(),
        timed_out,
        duration_ms,
    )


def _refuse(code: str, path: str, *, limit: int | None = None, kind: str = "other") -> NoReturn:
    raise fshelper.error_for(code, path, limit=limit, kind=kind)


class _FakeWorkspace:
    """File operations of the fake: realpath checks, not the kernel's guarantee.

    Good enough for API tests; confinement against a racing symlink swap is
    only proven for the Docker provider (siesta-fs).
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, path: str) -> Path:
        real = (self.root / path).resolve()
        if real != self.root and self.root not in real.parents:
            _refuse("outside", path)
        return real

    def read(self, path: str, max_bytes: int, sink: ByteSink, strict: bool) -> int:
        real = self.resolve(path)
        if not real.exists():
            _refuse("not_found", path)
        if not real.is_file():
            kind = "directory" if real.is_dir() else "other"
            _refuse("not_a_file", path, kind=kind)
        size = real.stat().st_size
        if strict and size > max_bytes:
            _refuse("too_large", path, limit=max_bytes)
        with real.open("rb") as handle:
            left = max_bytes
            while left > 0 and (chunk := handle.read(min(left, 65536))):
                sink(chunk)
                left -= len(chunk)
        return size

    def write(self, path: str, chunks: Iterable[bytes], max_bytes: int) -> int:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            _refuse("not_a_file", path, kind="directory")
        temp = target.parent / f".siesta-fake-{os.getpid()}.tmp"
        total = 0
        with temp.open("wb") as handle:
            for chunk in chunks:
                total += len(chunk)
                if total > max_bytes:
                    handle.close()
                    temp.unlink()
                    _refuse("too_large", path, limit=max_bytes)
                handle.write(chunk)
        temp.replace(target)
        return total

    def list(self, path: str, max_entries: int) -> DirListing:
        real = self.resolve(path)
        if not real.exists():
            _refuse("not_found", path)
        if not real.is_dir():
            _refuse("not_a_directory", path)
        entries = []
        for child in real.iterdir():
            info = child.lstat()
            kind = (
                "symlink"
                if stat.S_ISLNK(info.st_mode)
                else "directory"
                if stat.S_ISDIR(info.st_mode)
                else "file"
                if stat.S_ISREG(info.st_mode)
                else "other"
            )
            entries.append(DirEntry(child.name, kind, info.st_size))
        entries.sort(key=lambda entry: entry.name.encode())
        return DirListing(entries[:max_entries], len(entries))
