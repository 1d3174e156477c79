"""A file system listing takes a bounded number of bytes and entries from the sandbox
(whose ``find`` may be anything): past either, a refusal naming the limit, raised as
the output comes, not after it was all kept."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import TransferTooLarge
from runtime.core.output import CapturedStream
from runtime.sandbox.filesystem import FsLimits, SandboxFilesystem
from runtime.sandbox.metadata import MetadataLimits
from runtime.sandbox.user_files import AsUser, UserFiles
from runtime.seams.providers import ExecResult, OutputListener, ProcessSpec, SandboxInside
from runtime.sessions.manager import SessionManager

LINE = "\tf\tf\t1\t644\t-rw-r--r--\troot\troot\t1700000000.0\t\t/mnt/work/{i}\0"
EMPTY = CapturedStream("", 0, truncated=False)


class Listing:
    """A ``find`` that prints ``count`` entries of ``pad`` extra bytes each."""

    pid = 1

    def __init__(self, count: int, pad: int) -> None:
        self._count, self._pad = count, pad
        self.printed = 0
        self.killed = threading.Event()

    def wait(self, on_output: OutputListener) -> ExecResult:
        for i in range(self._count):
            on_output("stdout", LINE.format(i=f"{i:08d}" + "x" * self._pad).encode())
            self.printed += 1
        return ExecResult(0, EMPTY, EMPTY, timed_out=False, duration_ms=0)

    def kill(self) -> None:
        self.killed.set()

    def close(self) -> None: ...


class Sandbox:
    def __init__(self, listing: Listing) -> None:
        self.listing = listing

    def start_process(self, sandbox_id: str, spec: ProcessSpec) -> Listing:
        return self.listing


class Sessions:
    @contextlib.contextmanager
    def operation(self, ctx: CallContext) -> Iterator[Any]:
        yield SimpleNamespace(record=SimpleNamespace(sandbox_id="s"))


def _list(count: int, pad: int, limits: FsLimits) -> tuple[Listing, Any]:
    listing = Listing(count, pad)
    files = UserFiles(
        cast(SessionManager, Sessions()),
        cast(SandboxInside, Sandbox(listing)),
        grace_seconds=1,
        metadata_limits=MetadataLimits(max_keys=100, max_bytes=4096),
    )
    who = AsUser(CallContext(org="o", user="u", conversation="c"), "root", "/mnt/work")
    filesystem = SandboxFilesystem(files, limits)
    try:
        return listing, filesystem.list_dir(who, ".", 1)
    except TransferTooLarge as exc:
        return listing, exc


LIMITS = FsLimits(
    max_watchers=8, max_watcher_bytes=1 << 20, max_listing_bytes=1 << 20, max_listing_entries=500
)


def test_a_listing_with_too_many_entries_is_refused_naming_the_limit() -> None:
    listing, refused = _list(100_000, 0, LIMITS)
    assert isinstance(refused, TransferTooLarge)
    assert refused.fields["limit"] == 500
    assert refused.fields["unit"] == "entries"
    assert "SIESTA_FILES__MAX_LISTING_ENTRIES" in refused.message
    assert listing.printed == 500  # refused at the 501st, as it came; the program ended
    assert listing.killed.is_set()


def test_a_listing_over_its_bytes_is_refused_naming_the_limit() -> None:
    listing, refused = _list(400, 4000, LIMITS)  # 400 paths of 4 KB: 1.6 MB
    assert isinstance(refused, TransferTooLarge)
    assert refused.fields["limit"] == 1 << 20
    assert refused.fields["unit"] == "bytes"
    assert "SIESTA_FILES__MAX_LISTING_BYTES" in refused.message
    assert listing.printed < 300


def test_a_listing_within_its_limits_is_answered() -> None:
    _, entries = _list(500, 0, LIMITS)
    assert isinstance(entries, list)
    assert len(entries) == 500


def test_the_limits_are_settings_with_defaults() -> None:
    from runtime.files.settings import FileSettings

    settings = FileSettings()
    assert settings.max_listing_bytes == 8 * 1024 * 1024
    assert settings.max_listing_entries == 20_000
    with pytest.raises(ValueError, match="max_listing_entries"):
        FileSettings(max_listing_entries=0)
