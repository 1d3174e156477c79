"""E2B's snapshots and forks through the stock ``e2b`` SDK on Docker: a snapshot is a
template id ``Sandbox.create`` starts from (``mode="full"``, memory, is refused with
the reason); the org's snapshots are listed and deleted; a fork copies the sandbox as
it is; another org sees none of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2b import Sandbox
from e2b.exceptions import SandboxException

from tests.e2b.conftest import TOKEN_B, E2bService

pytestmark = [pytest.mark.docker]

CHECK = "/opt/tool/run && cat /home/user/notes.txt"
KEPT = "tool works\nbefore\n"


@pytest.fixture
def source(e2b: E2bService) -> Iterator[Sandbox]:
    made = Sandbox.create("base", metadata={"test": "snapshots"}, **e2b.options())
    made.commands.run(
        "mkdir -p /opt/tool && printf '#!/bin/sh\\necho tool works\\n' > /opt/tool/run"
        " && chmod +x /opt/tool/run",
        user="root",
    )
    made.files.write("/home/user/notes.txt", "before\n")
    yield made
    Sandbox.kill(made.sandbox_id, **e2b.options())


def test_a_sandbox_created_from_a_snapshot_has_its_files_and_packages(
    e2b: E2bService, source: Sandbox
) -> None:
    # Memory cannot be kept on Docker here: asked for, a clear refusal, and nothing kept.
    with pytest.raises(SandboxException, match="cannot keep a sandbox's memory"):
        source.create_snapshot(name="with-memory", mode="full")
    assert Sandbox.list_snapshots(sandbox_id=source.sandbox_id, **e2b.options()).next_items() == []

    snapshot = source.create_snapshot(name="with-tool", mode="filesystem")
    assert snapshot.names == ["with-tool"]
    source.files.write("/home/user/notes.txt", "after\n")  # not in the snapshot

    started = Sandbox.create(snapshot.snapshot_id, **e2b.options())
    try:
        assert started.commands.run(CHECK).stdout == KEPT
        assert started.get_info().template_id == "base"
        assert source.files.read("/home/user/notes.txt") == "after\n"
    finally:
        started.kill()

    listed = Sandbox.list_snapshots(sandbox_id=source.sandbox_id, **e2b.options()).next_items()
    assert [s.snapshot_id for s in listed] == [snapshot.snapshot_id]
    other = Sandbox.list_snapshots(**e2b.options(api_key=TOKEN_B)).next_items()
    assert other == []
    assert not Sandbox.delete_snapshot(snapshot.snapshot_id, **e2b.options(api_key=TOKEN_B))
    with pytest.raises(Exception, match="not found"):
        Sandbox.create(snapshot.snapshot_id, **e2b.options(api_key=TOKEN_B))

    assert Sandbox.delete_snapshot(snapshot.snapshot_id, **e2b.options())
    assert not Sandbox.delete_snapshot(snapshot.snapshot_id, **e2b.options())
    assert Sandbox.list_snapshots(sandbox_id=source.sandbox_id, **e2b.options()).next_items() == []


def test_a_fork_starts_from_the_sandbox_as_it_is_and_the_source_runs_on(
    e2b: E2bService, source: Sandbox
) -> None:
    forks = source.fork(count=1)
    assert len(forks) == 1
    fork = forks[0]
    assert isinstance(fork, Sandbox), fork
    try:
        assert fork.sandbox_id != source.sandbox_id
        assert fork.commands.run(CHECK).stdout == KEPT
        assert fork.get_info().metadata == {"test": "snapshots"}
        fork.files.write("/home/user/notes.txt", "fork\n")
        assert source.commands.run(CHECK).stdout == KEPT
    finally:
        fork.kill()
    # The fork's own snapshot is not kept.
    assert Sandbox.list_snapshots(sandbox_id=source.sandbox_id, **e2b.options()).next_items() == []
