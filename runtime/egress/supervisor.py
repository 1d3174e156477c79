"""The service's own egress proxy process: started, watched, restarted.

The proxy runs as a child process (its connection handling stays off the API's
event loop and threads). A reader thread turns its event lines into logs and
metrics; if the process dies, the thread starts a new one after a short pause.
Closing the service closes the child's stdin, which ends it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from runtime.core.errors import ConfigurationError
from runtime.egress.proxy import ProxyConfig
from runtime.egress.server import config_to_json

log = logging.getLogger(__name__)
READY_TIMEOUT_SECONDS = 15.0
RESTART_PAUSE_SECONDS = 1.0

EventSink = Callable[[dict[str, Any]], None]


class ProxyProcess:
    def __init__(self, config: ProxyConfig, on_event: EventSink) -> None:
        self._config = config
        self._on_event = on_event
        self._closing = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._watcher: threading.Thread | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> None:
        """Start the proxy and wait until it listens (or say why it could not)."""
        stdout = self._spawn()
        self._watcher = threading.Thread(
            target=self._watch, args=(stdout,), name="egress-proxy", daemon=True
        )
        self._watcher.start()

    def _spawn(self) -> IO[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "runtime.egress.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,  # stderr: the service's own, so a traceback reaches its log
            start_new_session=True,  # a Ctrl-C meant for the service is not its
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(config_to_json(self._config) + "\n")
        process.stdin.flush()
        self._process = process
        ready = _first_event(process.stdout, READY_TIMEOUT_SECONDS)
        if ready is None or ready.get("event") != "ready":
            process.kill()
            process.wait()
            where = f"{self._config.host}:{self._config.port}"
            why = (ready or {}).get("detail", "it did not answer (see the log above)")
            msg = f"the egress proxy did not start on {where}: {why}"
            raise ConfigurationError(msg)
        log.info(
            "egress proxy listening on %s:%s (pid %s)", ready["host"], ready["port"], process.pid
        )
        return process.stdout

    def _watch(self, stdout: IO[str]) -> None:
        while True:
            for line in stdout:
                with contextlib.suppress(ValueError):
                    self._on_event(json.loads(line))
            if self._closing.wait(RESTART_PAUSE_SECONDS):
                return
            log.error("the egress proxy exited (code %s); starting it again", self._exit_code())
            try:
                stdout = self._spawn()
                self.restarts += 1
            except (ConfigurationError, OSError):
                log.exception("the egress proxy did not start again; retrying")

    def _exit_code(self) -> int | None:
        return self._process.wait() if self._process else None

    def close(self) -> None:
        self._closing.set()
        process = self._process
        if process is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()  # the proxy's signal to end
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self._watcher:
            self._watcher.join(timeout=5)


def _first_event(stdout: IO[str], timeout: float) -> dict[str, Any] | None:
    result: list[dict[str, Any] | None] = [None]

    def read() -> None:
        line = stdout.readline()
        with contextlib.suppress(ValueError):
            result[0] = json.loads(line) if line else None

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0]
