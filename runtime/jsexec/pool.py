"""A pool of pre-started JS worker processes, and running one script on one.

Each worker is its own process group, talks over two dedicated pipes, and runs
exactly one script. The parent enforces the wall-clock deadline (helper calls
included) and the memory limit (resident memory, checked every few
milliseconds), kills the whole group on a breach or when the worker crashes,
and starts a replacement in the background.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.core.errors import JS_CRASHED, JS_MEMORY_LIMIT, JS_TIMEOUT, JsUnavailable, SiestaError
from runtime.jsexec.protocol import ProtocolError, receive, send
from runtime.jsexec.settings import JsSettings
from runtime.jsexec.zygote import Template

log = logging.getLogger(__name__)

POLL_SECONDS = 0.02

Dispatch = Callable[[str, list[Any], float], Any]
"""(helper name, arguments, seconds left until the deadline) → value; raises HelperError."""


class HelperError(Exception):
    """A helper refused its arguments or failed: becomes a catchable JS Error
    (with ``code`` as the Error's ``code`` property when given)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ScriptOutcome:
    result: str | None = None
    error: dict[str, Any] | None = None
    logs: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    truncated: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0


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
        ready, _, _ = select.select([self.from_worker], [], [], timeout)
        return bool(ready) and receive(self.from_worker) == {"type": "ready"}

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
        self._template = Template() if settings.worker_start == "fork" else None
        for _ in range(settings.pool_size):
            self._replace()

    def _replace(self) -> None:
        threading.Thread(target=self._start_one, name="js-worker-start", daemon=True).start()

    def _start_one(self) -> None:
        if self._closed:
            return
        try:
            worker = Worker.forked(self._template) if self._template else Worker.executed()
        except OSError as error:
            log.warning("a JS worker could not be started (%s); trying again", error)
            time.sleep(1)
            self._replace()
            return
        if worker.wait_ready(self._settings.worker_start_timeout_seconds) and not self._closed:
            self._ready.put(worker)
        else:
            worker.kill()
            if not self._closed:
                log.warning("a JS worker did not start; trying again")
                time.sleep(1)
                self._replace()

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
        started = time.monotonic()
        try:
            worker = self._ready.get(timeout=self._settings.acquire_timeout_seconds)
        except queue.Empty:
            msg = (
                f"no JavaScript worker became free within "
                f"{self._settings.acquire_timeout_seconds:g} seconds"
            )
            raise JsUnavailable(msg, limit=self._settings.acquire_timeout_seconds) from None
        outcome = ScriptOutcome()
        try:
            _Session(worker, self._settings, dispatch, on_status, outcome).run(
                code, started + timeout, timeout
            )
        finally:
            worker.kill()
            # One script per worker. Its successor is made now rather than when the
            # script starts: a fork and a new V8 context would compete with the
            # script for the CPU, and the other ready workers cover the meantime.
            self._replace()
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome


class _Session:
    """One script on one worker: the message loop, the deadline, the memory watch."""

    def __init__(
        self,
        worker: Worker,
        settings: JsSettings,
        dispatch: Dispatch,
        on_status: Callable[[str], None],
        outcome: ScriptOutcome,
    ) -> None:
        self.worker = worker
        self.settings = settings
        self.dispatch = dispatch
        self.on_status = on_status
        self.outcome = outcome
        self.log_bytes = 0
        self.status_bytes = 0
        self.dropped_statuses = 0

    def run(self, code: str, deadline: float, timeout: float) -> None:
        s = self.settings
        limits = {
            "maxLogs": s.max_log_entries,
            "maxLogBytes": s.max_log_entry_bytes,
            "maxResultBytes": s.max_result_bytes,
        }
        try:
            send(self.worker.to_worker, {"type": "run", "code": code, "limits": limits})
        except OSError:
            self._fail(JS_CRASHED, "the JavaScript worker died before the script started")
            return
        memory_limit = s.memory_limit_mb * 1024 * 1024
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(
                    JS_TIMEOUT,
                    f"the script ran past the limit of {timeout:g} seconds",
                    limit=timeout,
                    unit="seconds",
                )
                return
            readable, _, _ = select.select(
                [self.worker.from_worker], [], [], min(remaining, POLL_SECONDS)
            )
            if self.worker.rss_bytes() > memory_limit:
                self._fail(
                    JS_MEMORY_LIMIT,
                    f"the script used more than the limit of {s.memory_limit_mb} MB",
                    limit=s.memory_limit_mb,
                    unit="MB",
                )
                return
            if not readable:
                continue
            try:
                message = receive(self.worker.from_worker)
            except (OSError, ProtocolError, ValueError):
                message = None
            if message is None:
                self._fail(JS_CRASHED, "the JavaScript worker stopped unexpectedly")
                return
            if self._handle(message, deadline):
                return

    def _handle(self, message: dict[str, Any], deadline: float) -> bool:
        kind = message.get("type")
        if kind == "log":
            self._log(str(message["message"]))
        elif kind == "status":
            self._status(str(message["message"]))
        elif kind == "call":
            send(self.worker.to_worker, self._call(message, deadline))
        elif kind == "done":
            self.outcome.result = message.get("result")
            self.outcome.error = message.get("error")
            dropped = int(message.get("droppedLogs") or 0)
            if dropped:
                self.outcome.truncated["logs"] = True
                self.outcome.truncated["droppedLogs"] = dropped
            if message.get("truncated"):
                self.outcome.truncated["result"] = True
                self.outcome.truncated["resultChars"] = message.get("resultChars")
                self.outcome.truncated["limitBytes"] = self.settings.max_result_bytes
            return True
        return False

    def _log(self, text: str) -> None:
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if self.log_bytes + size > self.settings.max_log_total_bytes:
            self.outcome.truncated["logs"] = True
            return
        self.log_bytes += size
        self.outcome.logs.append(text)

    def _status(self, text: str) -> None:
        """Keep and pass on a status within the count and byte limits; past them
        only count it (a script calling ``logStatus`` in a loop costs no memory)."""
        s = self.settings
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if (
            len(self.outcome.statuses) >= s.max_status_entries
            or self.status_bytes + size > s.max_status_total_bytes
        ):
            self.dropped_statuses += 1
            self.outcome.truncated.update(
                statuses=True,
                droppedStatuses=self.dropped_statuses,
                limitStatuses=s.max_status_entries,
                limitStatusBytes=s.max_status_total_bytes,
            )
            return
        self.status_bytes += size
        self.outcome.statuses.append(text)
        self.on_status(text)

    def _call(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        helper = str(message.get("helper"))
        args = message.get("args")
        try:
            if not isinstance(args, list):
                msg = f"{helper}: arguments must be a list"
                raise HelperError(msg)
            value = self.dispatch(helper, args, max(0.0, deadline - time.monotonic()))
        except HelperError as error:
            return {"type": "reply", "ok": False, "error": str(error), "code": error.code}
        except SiestaError as error:
            failure = f"{helper}: {error.message}"
            return {"type": "reply", "ok": False, "error": failure, "code": error.code}
        return {"type": "reply", "ok": True, "value": value}

    def _fail(self, code: str, message: str, **fields: Any) -> None:
        self.outcome.error = {"code": code, "message": message, **fields}
