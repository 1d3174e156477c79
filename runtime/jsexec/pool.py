"""A pool of pre-started JS worker processes, and running one script on one.

Each worker is its own process group, talks over two dedicated pipes, and runs
exactly one script (``session.py``). The parent enforces the wall-clock deadline
(helper calls included) and the memory limit (resident memory, checked every few
milliseconds), kills the whole group on a breach, when the worker crashes or
says something it should not, and starts a replacement in the background.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runtime.core.errors import JsUnavailable
from runtime.jsexec.jail import JailSpec, problem
from runtime.jsexec.protocol import ProtocolError, receive_by
from runtime.jsexec.session import Dispatch, HelperError, ScriptOutcome, Session
from runtime.jsexec.settings import JsSettings
from runtime.jsexec.zygote import Template

log = logging.getLogger(__name__)
SLOW_START_SECONDS = 5.0
"""A worker start slower than this is logged with where the time went."""


class Worker:
    """One worker process and the service's ends of its two pipes."""

    def __init__(
        self,
        pid: int,
        to_worker: int,
        from_worker: int,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.pid = pid
        self.to_worker = to_worker
        self.from_worker = from_worker
        self.process = process
        """Set when this service started it (an exec); a fork is the template's to reap."""
        # the service never waits on a worker without a deadline (protocol.py)
        os.set_blocking(to_worker, False)
        os.set_blocking(from_worker, False)

    @classmethod
    def forked(cls, template: Template) -> Worker:
        return cls(*template.fork())

    @classmethod
    def executed(cls) -> Worker:
        to_worker_r, to_worker = os.pipe()
        from_worker, from_worker_w = os.pipe()
        process = subprocess.Popen(
            [sys.executable, "-m", "runtime.jsexec.worker", str(to_worker_r), str(from_worker_w)],
            pass_fds=(to_worker_r, from_worker_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: killed as a whole
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
        return cls(process.pid, to_worker, from_worker, process)

    def wait_ready(self, timeout: float) -> bool:
        try:
            message = receive_by(self.from_worker, time.monotonic() + timeout, 64)
        except (OSError, ProtocolError):
            return False
        return message == {"type": "ready"}

    def rss_bytes(self) -> int:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        for fd in (self.to_worker, self.from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)


class WorkerPool:
    def __init__(self, settings: JsSettings) -> None:
        self._settings = settings
        self._ready: queue.Queue[Worker] = queue.Queue()
        self._closed = False
        self._start_problem: str | None = None
        """Why the last worker start failed, until one succeeds: said when none is free."""
        self._starts_lock = threading.Lock()
        self._start_count = 0
        self._starts_end_by: dict[int, float] = {}
        """Worker starts under way and the time each ends by, ready or failed."""
        self.jail_problem = problem(settings.jail)
        """Why no worker can be started here (the jail cannot be built), or None."""
        self._template = (
            Template(jail_spec(settings), settings.template_answer_seconds)
            if settings.worker_start == "fork"
            else None
        )
        if self.jail_problem is not None:
            log.error("the JavaScript executor is unavailable: %s", self.jail_problem)
            return
        for _ in range(settings.pool_size):
            self._replace()

    def _replace(self) -> None:
        # registered before its thread runs: a script waiting for a worker never sees
        # a gap between a failed start and its retry
        began = time.monotonic()
        # two fork attempts (the template started afresh once), then the wait for ready
        settings = self._settings
        end_by = (
            began + 2 * settings.template_answer_seconds + settings.worker_start_timeout_seconds
        )
        with self._starts_lock:
            self._start_count += 1
            start = self._start_count
            self._starts_end_by[start] = end_by
        threading.Thread(
            target=self._start_one, args=(start,), name="js-worker-start", daemon=True
        ).start()

    def _start_one(self, start: int) -> None:
        try:
            if not self._closed:
                self._start_and_offer(time.monotonic())
        finally:
            with self._starts_lock:
                del self._starts_end_by[start]

    def _latest_start_end(self) -> float:
        """When the last worker start under way ends at the latest (0 when none is)."""
        with self._starts_lock:
            return max(self._starts_end_by.values(), default=0.0)

    def _start_and_offer(self, began: float) -> None:
        try:
            worker = Worker.forked(self._template) if self._template else Worker.executed()
        except Exception as error:  # any failure: nothing else would start this one again
            self._start_problem = f"starting a worker failed: {error}"
            log.warning("a JS worker could not be started (%s); trying again", error)
            time.sleep(1)
            self._replace()
            return
        forked = time.monotonic()
        limit = self._settings.worker_start_timeout_seconds
        if worker.wait_ready(limit) and not self._closed:
            self._start_problem = None
            took = time.monotonic() - began
            if took > SLOW_START_SECONDS:
                log.warning(
                    "a JS worker took %.1f s to start (%.1f s to fork, %.1f s to be ready)",
                    took,
                    forked - began,
                    took - (forked - began),
                )
            self._ready.put(worker)
        else:
            worker.kill()
            if not self._closed:
                self._start_problem = (
                    f"the last worker started was not ready within {limit:g} s "
                    f"(worker_start_timeout_seconds; {forked - began:.1f} s to fork it)"
                )
                log.warning("a JS worker did not start: %s; trying again", self._start_problem)
                time.sleep(1)
                self._replace()

    @property
    def ready_workers(self) -> int:
        """Workers started and waiting for a script."""
        return self._ready.qsize()

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._ready.get_nowait().kill()
            except queue.Empty:
                break
        if self._template is not None:
            self._template.close()

    def run(
        self, code: str, dispatch: Dispatch, on_status: Callable[[str], None], timeout: float
    ) -> ScriptOutcome:
        """Run one script; errors of the script are in the outcome, not raised."""
        if self.jail_problem is not None:
            msg = f"the JavaScript executor is unavailable: {self.jail_problem}"
            raise JsUnavailable(msg)
        started = time.monotonic()
        worker = self._acquire()
        # the script's clock starts with its worker: a wait for one is not its time
        acquired = time.monotonic()
        outcome = ScriptOutcome()
        try:
            Session(worker, self._settings, dispatch, on_status, outcome).run(
                code, acquired + timeout, timeout
            )
        finally:
            worker.kill()
            # One script per worker. Its successor is made now rather than when the
            # script starts: a fork and a new V8 context would compete with the
            # script for the CPU, and the other ready workers cover the meantime.
            self._replace()
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome

    def _acquire(self) -> Worker:
        """A free worker, waited for up to ``acquire_timeout_seconds``; a start under way
        then is waited for too, to its own limit (once: a pool failing to start workers
        answers unavailable, not never). A pool still making its first workers on a
        loaded host is slow, not unavailable."""
        began = time.monotonic()
        limit = self._settings.acquire_timeout_seconds
        with contextlib.suppress(queue.Empty):
            return self._ready.get(timeout=limit)
        msg = f"no JavaScript worker became free within {limit:g} seconds"
        start_left = self._latest_start_end() - time.monotonic()
        if start_left > 0:
            with contextlib.suppress(queue.Empty):
                return self._ready.get(timeout=start_left)
            msg += (
                f", nor from the worker start under way then "
                f"({time.monotonic() - began:.0f} s in all)"
            )
        if self._start_problem is not None:
            msg += f" ({self._start_problem})"
        raise JsUnavailable(msg, limit=limit)


def jail_spec(settings: JsSettings) -> JailSpec:
    return JailSpec(
        mode=settings.jail,
        uid=settings.jail_uid,
        # the CPU a worker may use in its whole life: its longest script and a margin
        # (the wall-clock deadline normally ends it first)
        cpu_seconds=math.ceil(settings.timeout_seconds) + 5,
        # the address space it may add: beyond the resident limit the service polls
        # (which answers js_memory_limit), so this only catches what the poll misses
        memory_margin_bytes=2 * settings.memory_limit_mb * 1024 * 1024,
    )


__all__ = ["Dispatch", "HelperError", "ScriptOutcome", "Worker", "WorkerPool", "jail_spec"]
