"""Staging per conversation, readFile pages and listFiles cuts, on the fake provider
and the SQLite store (the store's side is in ``store/test_staging_contract.py``)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime.core.context import CallContext
from runtime.core.errors import InvalidArguments, OffsetPastEnd, TransferTooLarge
from runtime.core.records import FileKind
from runtime.files.conversation import ConversationFiles, LocalBlobStore
from runtime.files.settings import FileSettings
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.providers.fake import FakeProvider
from runtime.sandbox.operations import Sandbox
from runtime.seams.provider_settings import SandboxSettings
from runtime.seams.stores import Stores
from runtime.services import assemble_sessions
from runtime.sessions.leases import Leases
from runtime.sessions.manager import SessionManager
from runtime.settings import Settings
from runtime.store.sqlite import open_sqlite
from runtime.tools.adapters.system import sandbox_adapters
from runtime.tools.call import ToolCall
from tests.helpers import tool_call

CTX = CallContext("org", "user", "conv", base_image="debian-base")


@dataclass
class Rig:
    sandbox: Sandbox
    files: ConversationFiles
    sessions: SessionManager
    provider: FakeProvider
    store: Stores

    def stage(self, *names: str, ctx: CallContext = CTX) -> dict[str, Any]:
        result = self.sandbox.run_command(ctx, "true", files=list(names))
        return result.model_dump()

    def delete_conversation(self, ctx: CallContext = CTX) -> None:
        with Leases(self.store.leases, Settings().lease).hold(ctx.key) as lease:
            self.sessions.teardown(ctx.org, ctx.conversation, lease)
        self.files.delete_all(ctx.org, ctx.conversation)


def rig(tmp_path: Path, **limits: int) -> Iterator[Rig]:
    store = open_sqlite(tmp_path / "siesta.db")
    provider = FakeProvider(tmp_path / "sandboxes")
    images = ImageCatalog(
        [CatalogImage(id="debian-base", title="Base", image="siesta/debian-base:1")], tmp_path
    )
    settings = Settings(sandbox=SandboxSettings(), files=FileSettings.model_validate(limits))
    sessions, _, _, _ = assemble_sessions(store, provider, images, settings)
    files = ConversationFiles(store.files, LocalBlobStore(tmp_path / "blobs"), settings.files)
    sandbox = Sandbox(sessions, provider, files, settings.command, settings.files)
    yield Rig(sandbox, files, sessions, provider, store)
    sessions.close()
    provider.close()
    store.close()


@pytest.fixture
def staging(tmp_path: Path) -> Iterator[Rig]:
    yield from rig(tmp_path, max_staged_bytes_per_conversation=1000)


def upload(files: ConversationFiles, name: str, size: int, ctx: CallContext = CTX) -> str:
    return files.upload(ctx, name, None, iter([b"x" * size])).file_id


def adapter_call() -> ToolCall:
    base = tool_call("readFile")
    return ToolCall(CTX, base.agent, base.user, base.function)


def refused(rig: Rig, *names: str) -> dict[str, Any]:
    with pytest.raises(TransferTooLarge) as caught:
        rig.stage(*names)
    return caught.value.to_dict()


# -- staging: a running total per conversation --------------------------------------


def test_the_staged_total_holds_across_calls_and_the_error_states_the_limit(
    staging: Rig,
) -> None:
    upload(staging.files, "a.bin", 600)
    upload(staging.files, "b.bin", 600)
    assert staging.stage("a.bin")["stagedFiles"][0]["size"] == 600
    error = refused(staging, "b.bin")
    assert (error["code"], error["limit"], error["unit"]) == ("transfer_too_large", 1000, "bytes")
    assert (error["scope"], error["stagedBytes"], error["requestedBytes"]) == (
        "conversation",
        600,
        600,
    )
    assert "1000 bytes per conversation" in error["message"]
    listed = staging.sandbox.list_files(CTX, "in")
    assert [entry.name for entry in listed.entries] == ["a.bin"]  # nothing copied


@pytest.mark.parametrize(
    ("sizes", "second", "accepted"),
    [
        ({"a": 400, "b": 600}, ["b"], True),  # exactly at the limit
        ({"a": 400, "b": 601}, ["b"], False),  # one byte over
        ({"a": 400, "b": 100}, ["a", "b"], True),  # a again counts nothing
        ({"a": 900, "b": 101}, ["a", "b"], False),  # all or nothing: a is not the problem
    ],
)
def test_staging_counts_each_file_once_against_the_limit(
    staging: Rig, sizes: dict[str, int], second: list[str], accepted: bool
) -> None:
    for name, size in sizes.items():
        upload(staging.files, name, size)
    staging.stage("a")
    if accepted:
        staging.stage(*second)
    else:
        refused(staging, *second)


def test_restaging_the_same_file_counts_once_and_copies_it_again(staging: Rig) -> None:
    upload(staging.files, "a.bin", 600)
    for _ in range(3):
        staging.stage("a.bin")
    staging.sandbox.run_command(CTX, "echo changed > in/a.bin")
    staging.stage("a.bin")
    assert staging.sandbox.read_file(CTX, "in/a.bin", 8).content == "xxxxxxxx"


def test_a_file_with_new_bytes_counts_again(staging: Rig) -> None:
    record = staging.files.add_bytes(CTX, "notes.txt", FileKind.ARTIFACT, b"x" * 600, editable=True)
    staging.stage("notes.txt")
    staging.files.replace_content(CTX, record.file_id, b"y" * 600)
    error = refused(staging, "notes.txt")
    assert (error["stagedBytes"], error["requestedBytes"]) == (600, 600)


def test_a_replaced_sandbox_starts_from_zero(staging: Rig) -> None:
    upload(staging.files, "a.bin", 600)
    upload(staging.files, "b.bin", 600)
    first = staging.stage("a.bin")
    staging.provider.lifecycle.destroy(
        staging.provider.lifecycle.sandbox_id_for(first["sessionId"])
    )
    second = staging.stage("b.bin")
    assert second["workspaceReset"] is True


def test_deleting_the_conversation_resets_the_count(staging: Rig) -> None:
    upload(staging.files, "a.bin", 600)
    staging.stage("a.bin")
    staging.delete_conversation()
    upload(staging.files, "b.bin", 600)
    staging.stage("b.bin")


def test_conversations_and_orgs_have_their_own_totals(staging: Rig) -> None:
    others = [
        CallContext("org", "user", "other", base_image="debian-base"),
        CallContext("org-b", "user", "conv", base_image="debian-base"),
    ]
    upload(staging.files, "a.bin", 900)
    staging.stage("a.bin")
    for ctx in others:
        upload(staging.files, "a.bin", 900, ctx=ctx)
        staging.stage("a.bin", ctx=ctx)


# -- readFile pages ----------------------------------------------------------------------

TEXT = "aé€😀b"  # 1, 2, 3 and 4 UTF-8 bytes, then 1: 11 bytes


@pytest.mark.parametrize(
    ("offset", "max_bytes", "content", "start", "next_offset"),
    [
        (0, 100, TEXT, 0, None),
        (0, 3, "aé", 0, 3),  # a cut character waits for the next page
        (3, 100, "€😀b", 3, None),
        (2, 100, "€😀b", 3, None),  # inside é: moved to the next character
        (4, 4, "😀", 6, 10),  # inside €: moved forward; the page starts at 😀
        (4, 3, "", 6, 6),  # moved forward, and 😀 does not fit: an empty page, onwards
        (7, 100, "b", 10, None),  # inside 😀 (three continuation bytes)
        (7, 1, "b", 10, None),
        (10, 1, "b", 10, None),
        (11, 100, "", 11, None),  # the end: an empty last page
    ],
)
def test_read_pages_of_text_never_split_a_character(
    staging: Rig, offset: int, max_bytes: int, content: str, start: int, next_offset: int | None
) -> None:
    staging.sandbox.write_file(CTX, "t.txt", TEXT)
    page = staging.sandbox.read_file(CTX, "t.txt", max_bytes, offset)
    assert (page.content, page.encoding, page.offset) == (content, "utf-8", start)
    assert (page.nextOffset, page.truncated, page.size) == (
        next_offset,
        next_offset is not None,
        11,
    )
    assert page.returnedBytes == len(content.encode())


def test_paging_with_next_offset_reads_the_whole_file(tmp_path: Path) -> None:
    for small in rig(tmp_path, max_read_bytes=5):
        text = "Grüße, 世界! " * 7
        small.sandbox.write_file(CTX, "t.txt", text)
        pages, offset = [], 0
        while True:
            page = small.sandbox.read_file(CTX, "t.txt", offset=offset)
            pages.append(page.content)
            assert page.limitBytes == 5 and page.returnedBytes <= 5
            if page.nextOffset is None:
                break
            offset = page.nextOffset
        assert "".join(pages) == text


@pytest.mark.parametrize(
    ("offset", "encoding", "content", "start", "next_offset"),
    [
        (0, "base64", base64.b64encode(b"\xf0").decode(), 0, 1),  # raw, and onwards
        (1, "utf-8", "", 4, 4),  # moved to the next character: onwards too
    ],
)
def test_a_page_smaller_than_a_character_still_moves_on(
    staging: Rig, offset: int, encoding: str, content: str, start: int, next_offset: int
) -> None:
    staging.sandbox.write_file(CTX, "t.txt", "😀😀")
    page = staging.sandbox.read_file(CTX, "t.txt", 1, offset)
    assert (page.encoding, page.content) == (encoding, content)
    assert (page.offset, page.nextOffset) == (start, next_offset)


def test_binary_pages_are_base64_from_the_exact_offset(staging: Rig) -> None:
    data = bytes(range(256)) * 2
    staging.sandbox.run_command(
        CTX, 'python3 -c "import sys; sys.stdout.buffer.write(bytes(range(256))*2)" > b.bin'
    )
    page = staging.sandbox.read_file(CTX, "b.bin", 8, 130)
    assert page.encoding == "base64"
    assert base64.b64decode(page.content) == data[130:138]
    assert (page.offset, page.nextOffset, page.size) == (130, 138, 512)


@pytest.mark.parametrize(
    ("arguments", "code", "fields"),
    [
        ({"path": "t.txt", "offset": 12}, "offset_past_end", {"offset": 12, "size": 11}),
        ({"path": "t.txt", "offset": 10**12}, "offset_past_end", {"offset": 10**12, "size": 11}),
        ({"path": "t.txt", "offset": -1}, "invalid_arguments", {}),
        ({"path": "t.txt", "offset": "x"}, "invalid_arguments", {}),
    ],
)
def test_offsets_out_of_range_are_invalid_arguments(
    staging: Rig, arguments: dict[str, Any], code: str, fields: dict[str, int]
) -> None:
    staging.sandbox.write_file(CTX, "t.txt", TEXT)
    read = sandbox_adapters(staging.sandbox)["readFile"]
    with pytest.raises((InvalidArguments, OffsetPastEnd)) as caught:
        read(adapter_call(), arguments)
    error = caught.value.to_dict()
    assert error["code"] == code
    assert {key: error[key] for key in fields} == fields
    if fields:
        assert f"{fields['size']} bytes" in error["message"]


def test_the_adapter_passes_the_offset(staging: Rig) -> None:
    staging.sandbox.write_file(CTX, "t.txt", "0123456789")
    read = sandbox_adapters(staging.sandbox)["readFile"]
    page = read(adapter_call(), {"path": "t.txt", "offset": 4, "maxBytes": 3})
    assert (page["content"], page["offset"], page["nextOffset"]) == ("456", 4, 7)


# -- listFiles: a folder cut at its entry limit says so ---------------------------------


@pytest.mark.parametrize(("count", "truncated"), [(2, False), (3, False), (4, True), (9, True)])
def test_listing_says_when_a_folder_was_cut(tmp_path: Path, count: int, truncated: bool) -> None:
    for small in rig(tmp_path, max_list_entries=3):
        small.sandbox.run_command(CTX, f"mkdir d && cd d && touch $(seq -f 'f%02g' {count})")
        listed = small.sandbox.list_files(CTX, "d")
        assert [entry.name for entry in listed.entries] == [
            f"f{i:02d}" for i in range(1, min(count, 3) + 1)
        ]
        assert (listed.total, listed.truncated, listed.limitEntries) == (count, truncated, 3)
