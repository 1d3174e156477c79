"""A watcher nobody reads keeps a bounded number of bytes of changes, and says how
many it dropped past the limit (names are a sandbox's: up to 4 KiB each)."""

from __future__ import annotations

import threading

from runtime.core.output import CapturedStream
from runtime.sandbox.watchers import CHANGE_OVERHEAD_BYTES, Watcher
from runtime.seams.providers import ExecResult, OutputListener

LIMIT = 64 * 1024
LONG_NAME = "d/" * 2000  # 4000 bytes, as a deep tree makes them


class ScriptedWatch:
    """``siesta-fs watch`` that says ready, prints ``records``, then runs until killed."""

    pid = 1

    def __init__(self, records: list[bytes]) -> None:
        self._records = records
        self._killed = threading.Event()
        self.printed = threading.Event()

    def wait(self, on_output: OutputListener) -> ExecResult:
        on_output("stdout", b"ready\t\0")
        for record in self._records:
            on_output("stdout", record)
        self.printed.set()
        self._killed.wait(10)
        empty = CapturedStream("", 0, truncated=False)
        return ExecResult(137, empty, empty, timed_out=False, duration_ms=0)

    def kill(self) -> None:
        self._killed.set()

    def write(self, data: bytes) -> None: ...
    def close_input(self) -> None: ...
    def signal(self, signo: int) -> None: ...
    def resize(self, columns: int, rows: int) -> None: ...
    def close(self) -> None: ...


def _watch(records: list[bytes]) -> Watcher:
    process = ScriptedWatch(records)
    watcher = Watcher(process, "org/conv", "/tmp", LIMIT)
    watcher.start()
    assert process.printed.wait(10)
    return watcher


def test_a_watcher_keeps_at_most_its_byte_limit_and_counts_the_rest() -> None:
    records = [f"create\t{LONG_NAME}{i}\0".encode() for i in range(1000)]  # ~4 MB
    watcher = _watch(records)
    try:
        taken = watcher.take()
        kept = sum(len(c.name) + len("create\t") + CHANGE_OVERHEAD_BYTES for c in taken.changes)
        assert 0 < kept <= LIMIT
        assert len(taken.changes) + taken.dropped == 1000
        assert taken.dropped > 900
        assert taken.limit_bytes == LIMIT
        assert taken.changes[0].name == f"{LONG_NAME}0"  # the oldest are kept
        again = watcher.take()
        assert (again.changes, again.dropped) == ([], 0)  # counted once, then reset
    finally:
        watcher.stop()


def test_the_kernels_overflow_is_reported_as_dropped() -> None:
    watcher = _watch([b"create\ta\0", b"overflow\t\0", b"write\ta\0"])
    try:
        taken = watcher.take()
        assert [c.kind for c in taken.changes] == ["create", "write"]
        assert taken.dropped == 1
    finally:
        watcher.stop()
