"""A provider that runs commands on the host, one temp folder per sandbox.

For fast API-level tests only: there is no isolation at all. It keeps the
provider contract (timeout kills the process group, output capped while it is
produced) so tests written against it mean something; every behaviour is also
tested against Docker.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from runtime.output import HeadTailBuffer
from runtime.providers.base import (
    ExecRequest,
    ExecResult,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
)


class FakeProvider:
    def __init__(self, root: Path | None = None) -> None:
        self._root = root or Path(tempfile.mkdtemp(prefix="siesta-fake-"))
        self._labels: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def ping(self) -> None:
        return None

    def sandbox_id_for(self, session_id: str) -> str:
        return f"fake-{session_id}"

    def create(self, spec: SandboxSpec) -> str:
        sandbox_id = self.sandbox_id_for(spec.session_id)
        (self._root / sandbox_id).mkdir(parents=True)
        with self._lock:
            self._labels[sandbox_id] = dict(spec.labels)
        return sandbox_id

    def inspect(self, sandbox_id: str) -> SandboxInfo:
        with self._lock:
            labels = self._labels.get(sandbox_id)
        if labels is None or not (self._root / sandbox_id).is_dir():
            return SandboxInfo(sandbox_id, SandboxState.MISSING)
        return SandboxInfo(sandbox_id, SandboxState.RUNNING, labels)

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        stdout = HeadTailBuffer(request.max_output_bytes)
        stderr = HeadTailBuffer(request.max_output_bytes)
        started = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "-c", request.command],
            cwd=self._root / sandbox_id,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        sinks = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
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

    def destroy(self, sandbox_id: str) -> None:
        with self._lock:
            self._labels.pop(sandbox_id, None)
        shutil.rmtree(self._root / sandbox_id, ignore_errors=True)

    def list_sandboxes(self) -> list[SandboxInfo]:
        with self._lock:
            ids = list(self._labels)
        return [self.inspect(sandbox_id) for sandbox_id in ids]

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)
