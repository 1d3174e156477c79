"""Files' metadata and watch entries through /v1 on Docker: ``.../fs/metadata`` replaces
a file's ``user.e2b.*`` xattrs, stat, list and move show them, a watcher made with
``includeEntry`` reads each change with its entry, and the limits refuse with a 4xx
that names them. The same through the Python client."""

from __future__ import annotations

import time
from typing import Any

import pytest

from siesta_contract.filesystem import FsChange

from siesta_client import SiestaClient
from siesta_client.errors import SiestaError
from tests.api.test_filesystem_docker import code, fs, ok
from tests.helpers import TOKEN, ServiceProcess, headers, new_conversation, run_command

pytestmark = [pytest.mark.docker]


def test_metadata_is_set_shown_kept_by_a_move_and_cleared(docker_service: ServiceProcess) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "mkdir -p d && printf hi > d/a.txt")
    made = ok(
        fs(docker_service, conversation, "metadata", path="d/a.txt", metadata={"author": "mish"})
    )
    assert (made["path"], made["metadata"]) == ("/mnt/work/d/a.txt", {"author": "mish"})
    assert ok(fs(docker_service, conversation, "stat", path="d/a.txt"))["metadata"] == {
        "author": "mish"
    }
    listed = ok(fs(docker_service, conversation, "list", path="d"))["entries"]
    assert [(e["name"], e["metadata"]) for e in listed] == [("a.txt", {"author": "mish"})]

    # Replaced, not merged; bytes E2B's headers could not carry come through a command.
    replaced = {"stage": "two", "note": "a=b&c%d"}
    shown = ok(fs(docker_service, conversation, "metadata", path="d/a.txt", metadata=replaced))
    assert shown["metadata"] == replaced
    moved = ok(fs(docker_service, conversation, "move", source="d/a.txt", destination="d/b.txt"))
    assert moved["metadata"] == replaced
    cleared = ok(fs(docker_service, conversation, "metadata", path="d/b.txt", metadata={}))
    assert cleared["metadata"] == {}
    assert ok(fs(docker_service, conversation, "stat", path="d/b.txt"))["metadata"] == {}

    assert code(fs(docker_service, conversation, "metadata", path="d/none", metadata={})) == (
        404,
        "file_not_found",
    )
    assert code(fs(docker_service, conversation, "metadata", path="d", metadata={})) == (
        404,
        "not_a_file",
    )


def test_metadata_past_the_limits_is_refused_naming_the_limit(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "printf hi > a.txt")
    many = {f"k{i}": "v" for i in range(101)}
    refused = fs(docker_service, conversation, "metadata", path="a.txt", metadata=many)
    assert code(refused) == (422, "metadata_too_large")
    error = refused.json()["error"]
    assert error["limit"] == 100 and "SIESTA_FILES__MAX_METADATA_KEYS" in error["message"]

    large = fs(docker_service, conversation, "metadata", path="a.txt", metadata={"k": "v" * 4096})
    assert code(large) == (422, "metadata_too_large")
    error = large.json()["error"]
    assert error["limit"] == 4096 and "SIESTA_FILES__MAX_METADATA_BYTES" in error["message"]

    bad_key = fs(docker_service, conversation, "metadata", path="a.txt", metadata={"é": "v"})
    assert bad_key.status_code == 422  # printable ASCII only, as E2B's
    # Nothing was written by a refusal.
    assert ok(fs(docker_service, conversation, "stat", path="a.txt"))["metadata"] == {}


def changes_with_entries(
    service: ServiceProcess, url: str, wanted: set[tuple[str, str]]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + 15
    while not wanted <= {(c["type"], c["name"]) for c in found}:
        assert time.monotonic() < deadline, found
        polled = ok(service.client.get(url, params={"waitSeconds": 5}, headers=headers()))
        found += polled["changes"]
    return found


def test_a_watcher_made_to_include_entries_reads_each_change_with_its_entry(
    docker_service: ServiceProcess,
) -> None:
    conversation = new_conversation()
    run_command(docker_service.client, conversation, "mkdir -p w")
    made = fs(docker_service, conversation, "watchers", path="w", includeEntry=True)
    watcher = ok(made, 201)
    url = f"/v1/conversations/{conversation}/sandbox/fs/watchers/{watcher['id']}"
    run_command(docker_service.client, conversation, "printf hello > w/f.txt && rm -f w/gone")
    found = changes_with_entries(docker_service, url, {("create", "f.txt"), ("write", "f.txt")})
    write = next(c for c in found if (c["type"], c["name"]) == ("write", "f.txt"))
    assert write["entry"]["path"] == "/mnt/work/w/f.txt"
    assert (write["entry"]["type"], write["entry"]["size"]) == ("file", 5)

    run_command(docker_service.client, conversation, "rm w/f.txt")
    found = changes_with_entries(docker_service, url, {("remove", "f.txt")})
    removed = next(c for c in found if c["type"] == "remove")
    assert removed["entry"] is None  # nothing is there any more

    plain = ok(fs(docker_service, conversation, "watchers", path="w", allowNetworkMounts=True), 201)
    plain_url = f"/v1/conversations/{conversation}/sandbox/fs/watchers/{plain['id']}"
    run_command(docker_service.client, conversation, "touch w/x")
    found = changes_with_entries(docker_service, plain_url, {("create", "x")})
    assert all(c["entry"] is None for c in found)  # not asked for


def test_the_client_sets_metadata_and_watches_with_entries(docker_service: ServiceProcess) -> None:
    with SiestaClient(docker_service.base_url, TOKEN) as siesta:
        conv = siesta.conversation(
            new_conversation(), org="org-a", user="user-1", base_image="debian-base"
        )
        conv.make_dir("m")
        watcher = conv.watch("m", include_entry=True)
        run_command(docker_service.client, conv.id, "printf x > m/f")
        entry = conv.set_metadata("m/f", {"tag": "one"})
        assert (entry.path, entry.metadata) == ("/mnt/work/m/f", {"tag": "one"})
        assert conv.stat("m/f").metadata == {"tag": "one"}
        seen: list[FsChange] = []
        deadline = time.monotonic() + 15
        while not any(c.type == "create" and c.entry is not None for c in seen):
            assert time.monotonic() < deadline, seen
            seen += conv.changes(watcher.id, wait_seconds=5).changes
        created = next(c for c in seen if c.type == "create" and c.entry is not None)
        assert created.entry is not None and created.entry.path == "/mnt/work/m/f"
        conv.stop_watching(watcher.id)
        with pytest.raises(SiestaError) as refused:
            conv.set_metadata("m/f", {f"k{i}": "v" for i in range(101)})
        assert (refused.value.status, refused.value.code) == (422, "metadata_too_large")
