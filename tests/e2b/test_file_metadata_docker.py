"""The stock ``e2b`` SDK, unmodified, with envd 0.6.x's file features on Docker: file
metadata (``files.write(..., metadata=...)``, kept as ``user.e2b.*`` xattrs),
watch events with their entries (``include_entry``), and the network-mounts flag."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from e2b import (
    AsyncSandbox,
    FilesystemEvent,
    FilesystemEventType,
    FileType,
    InvalidArgumentException,
    Sandbox,
    WatchHandle,
)
from e2b.sandbox.filesystem.filesystem import WriteEntry

from tests.e2b.conftest import E2bService

pytestmark = [pytest.mark.docker]


@pytest.fixture
def sandbox(e2b: E2bService) -> Iterator[Sandbox]:
    made = Sandbox.create("base", **e2b.options())
    yield made
    Sandbox.kill(made.sandbox_id, **e2b.options())


def test_metadata_is_written_read_listed_renamed_and_replaced(sandbox: Sandbox) -> None:
    files = sandbox.files
    written = files.write("m/a.txt", "one", metadata={"Author": "mish", "purpose": "test"})
    # Keys travel as HTTP header names: lowercased, as envd keeps them.
    assert written.metadata == {"author": "mish", "purpose": "test"}
    assert files.get_info("m/a.txt").metadata == {"author": "mish", "purpose": "test"}
    listed = {entry.name: entry.metadata for entry in files.list("m")}
    assert listed == {"a.txt": {"author": "mish", "purpose": "test"}}
    renamed = files.rename("m/a.txt", "m/b.txt")
    assert (renamed.path, renamed.metadata) == ("/home/user/m/b.txt", written.metadata)

    # An overwrite replaces the metadata: without any, the file keeps none.
    assert files.write("m/b.txt", "two", metadata={"stage": "2"}).metadata == {"stage": "2"}
    assert files.get_info("m/b.txt").metadata == {"stage": "2"}
    assert files.write("m/b.txt", "three").metadata is None
    assert files.get_info("m/b.txt").metadata is None
    assert files.read("m/b.txt") == "three"

    # Every file of one upload gets it; set inside the sandbox, it shows the same way
    # (only user.e2b.*: other user xattrs are not metadata).
    many = [WriteEntry(path="m/c.txt", data="c"), WriteEntry(path="m/d.txt", data="d")]
    assert [i.metadata for i in files.write_files(many, metadata={"k": "v"})] == [{"k": "v"}] * 2
    sandbox.commands.run(
        "python3 -c \"import os; os.setxattr('m/c.txt', 'user.e2b.by', b'cmd'); "
        "os.setxattr('m/c.txt', 'user.other', b'x')\""
    )
    assert files.get_info("m/c.txt").metadata == {"by": "cmd", "k": "v"}


def test_metadata_past_the_limits_is_refused_before_anything_is_written(sandbox: Sandbox) -> None:
    with pytest.raises(InvalidArgumentException) as too_many:
        sandbox.files.write("big.txt", "x", metadata={f"k{i}": "v" for i in range(101)})
    assert "100" in str(too_many.value)
    assert "SIESTA_FILES__MAX_METADATA_KEYS" in str(too_many.value)
    with pytest.raises(InvalidArgumentException) as too_large:
        sandbox.files.write("big.txt", "x", metadata={"k": "v" * 4096}, use_octet_stream=True)
    assert "4096" in str(too_large.value)
    assert "SIESTA_FILES__MAX_METADATA_BYTES" in str(too_large.value)
    assert not sandbox.files.exists("big.txt")


def test_watch_events_carry_the_entry_when_asked(sandbox: Sandbox) -> None:
    sandbox.files.make_dir("w")
    handle = sandbox.files.watch_dir("w", include_entry=True, allow_network_mounts=True)
    try:
        sandbox.files.write("w/f.txt", "hello", metadata={"tag": "x"})
        events = until(handle, FilesystemEventType.WRITE)
        write = next(e for e in events if e.type == FilesystemEventType.WRITE)
        assert write.entry is not None
        assert (write.entry.path, write.entry.type) == ("/home/user/w/f.txt", FileType.FILE)
        assert (write.entry.size, write.entry.metadata) == (5, {"tag": "x"})
        sandbox.commands.run("rm w/f.txt")
        removed = until(handle, FilesystemEventType.REMOVE)[-1]
        assert removed.entry is None  # what is removed has no entry (envd's rule)
    finally:
        handle.stop()
    plain = sandbox.files.watch_dir("w")
    try:
        sandbox.files.write("w/g.txt", "x")
        assert all(e.entry is None for e in until(plain, FilesystemEventType.WRITE))
    finally:
        plain.stop()


def until(handle: WatchHandle, kind: FilesystemEventType) -> list[FilesystemEvent]:
    """The handle's events up to the first of ``kind``."""
    events: list[FilesystemEvent] = []
    deadline = time.monotonic() + 10
    while not any(e.type == kind for e in events):
        assert time.monotonic() < deadline, events
        events += handle.get_new_events()
        time.sleep(0.1)
    return events[: 1 + next(i for i, e in enumerate(events) if e.type == kind)]


def test_watch_events_carry_the_entry_through_the_async_stream(e2b: E2bService) -> None:
    async def watch() -> None:
        sandbox = await AsyncSandbox.create("base", **e2b.options())
        try:
            await sandbox.files.make_dir("w")
            seen = asyncio.Event()
            entries = []

            def on_event(event: object) -> None:
                entry = getattr(event, "entry", None)
                if entry is not None:
                    entries.append(entry)
                    seen.set()

            handle = await sandbox.files.watch_dir("w", on_event, include_entry=True)
            await sandbox.files.write("w/a.txt", "abc", metadata={"k": "v"})
            await asyncio.wait_for(seen.wait(), 10)
            await handle.stop()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped
            assert entries[0].path == "/home/user/w/a.txt"
            assert entries[0].name == "a.txt"
        finally:
            await sandbox.kill()

    asyncio.run(watch())
