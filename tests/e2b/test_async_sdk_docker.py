"""The stock ``e2b`` SDK's async client, unmodified, against the service on Docker.

It speaks the streaming RPCs the sync client does not use: ``StreamInput`` for a
process's input; configured only through the E2B environment variables.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from e2b import AsyncSandbox, CommandExitException, FileNotFoundException, TimeoutException

from tests.e2b.conftest import E2bService

pytestmark = [pytest.mark.docker]


def test_the_async_client_runs_streams_and_moves_files(
    e2b: E2bService, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in e2b.environment().items():
        monkeypatch.setenv(name, value)  # all a user sets: nothing passed in code
    asyncio.run(_async_client_session())


async def _async_client_session() -> None:
    sandbox = await AsyncSandbox.create("base", metadata={"test": "async"})
    try:
        seen: list[str] = []
        result = await sandbox.commands.run(
            "for i in 1 2 3; do echo line $i; done; echo oops >&2", on_stdout=seen.append
        )
        assert (result.stdout, result.stderr) == ("line 1\nline 2\nline 3\n", "oops\n")
        assert "".join(seen) == result.stdout
        with pytest.raises(CommandExitException):
            await sandbox.commands.run("exit 7")
        # Past its timeout a command fails its stream with DEADLINE_EXCEEDED, as envd's
        # does: a timeout, not a made-up exit code.
        with pytest.raises(TimeoutException):
            await sandbox.commands.run("sleep 30", timeout=1)

        await sandbox.files.write("async.txt", "from the async client")
        assert await sandbox.files.read("async.txt") == "from the async client"
        with pytest.raises(FileNotFoundException):
            await sandbox.files.read("nothing-here")

        # Input as one ordered stream (StreamInput) and as single calls (SendInput),
        # then EOF: what the process read comes back.
        upper = await sandbox.commands.run("tr a-z A-Z", background=True, stdin=True)
        async with sandbox.commands.stream_input(upper.pid) as stream:
            for word in ("quiet ", "streamed "):
                await stream.send(word)
        await sandbox.commands.send_stdin(upper.pid, "words\n")
        await sandbox.commands.close_stdin(upper.pid)
        assert (await upper.wait()).stdout == "QUIET STREAMED WORDS\n"

        sleeper = await sandbox.commands.run("sleep 300", background=True, timeout=0)
        listed = [p.pid for p in await sandbox.commands.list()]
        assert sleeper.pid in listed
        started = time.monotonic()
        assert await sandbox.commands.kill(sleeper.pid) is True
        with pytest.raises(CommandExitException):
            await sleeper.wait()
        assert time.monotonic() - started < 10

        # Watching through the WatchDir stream (the sync client polls a watcher).
        events: list[tuple[str, str]] = []
        await sandbox.files.make_dir("inbox")
        watch = await sandbox.files.watch_dir(
            "inbox", lambda e: events.append((e.type.value, e.name)), recursive=True
        )
        await sandbox.files.write("inbox/letter.txt", "dear")
        await sandbox.files.remove("inbox/letter.txt")
        deadline = time.monotonic() + 10
        while ("remove", "letter.txt") not in events:
            assert time.monotonic() < deadline, f"saw only {events}"
            await asyncio.sleep(0.1)
        assert events[0] == ("create", "letter.txt")
        await watch.stop()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

        info = await sandbox.get_info()
        assert (info.template_id, info.metadata) == ("base", {"test": "async"})
    finally:
        await sandbox.kill()
    assert await sandbox.is_running() is False
