"""A private redis-server for tests: its own port and folder, stopped afterwards."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from tests.helpers import free_port


class RedisServer:
    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:  # a failure, never a skip: setup installs it
            msg = "redis-server is not installed (scripts/setup.sh installs it)"
            raise RuntimeError(msg)
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart) on the same port; the append-only file keeps the data."""
        self.folder.mkdir(parents=True, exist_ok=True)
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--protected-mode",
            "no",
        ]
        with (self.folder / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.process is not None
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.exceptions.ConnectionError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def flush(self) -> None:
        client = redis.Redis.from_url(self.url)
        client.flushdb()
        client.close()
