"""The ``content`` System Tool over conversation files (SQLite store, local blobs),
through its adapters as the executor calls them, and its gating in the catalog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from siesta_contract.agents import AgentConfig, UserInfo

from runtime.core.context import CallContext
from runtime.core.errors import InvalidArguments, MissingInput, SiestaError
from runtime.files.content import ContentReader
from runtime.files.conversation import ConversationFiles, LocalBlobStore
from runtime.files.settings import ContentSettings, FileSettings
from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.store.sqlite import open_sqlite
from runtime.tools.adapters.content import content_adapters
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.catalog import build_catalog
from runtime.tools.settings import ToolSettings
from tests.helpers import tool_call

CTX = CallContext("org", "user", "conv")
LOG = "".join(f"line {n}: {'ERROR disk full' if n % 10 == 0 else 'ok'}\n" for n in range(1, 101))


class Tools:
    def __init__(self, files: ConversationFiles, settings: ContentSettings) -> None:
        self.files = files
        self.adapters: dict[str, Adapter] = content_adapters(ContentReader(files, settings))

    def upload(self, name: str, data: bytes | str, ctx: CallContext = CTX) -> str:
        raw = data.encode() if isinstance(data, str) else data
        return self.files.upload(
            ctx, name, None, iter([raw[i : i + 7] for i in range(0, len(raw), 7)])
        ).file_id

    def __call__(
        self,
        function: str,
        *,
        ctx: CallContext = CTX,
        agent: dict[str, Any] | None = None,
        **arguments: Any,
    ) -> Any:
        base = tool_call(function, agent=agent)
        return self.adapters[function](
            ToolCall(ctx, base.agent, base.user, base.function), arguments
        )

    def error(
        self,
        function: str,
        *,
        ctx: CallContext = CTX,
        agent: dict[str, Any] | None = None,
        **arguments: Any,
    ) -> dict[str, Any]:
        with pytest.raises(SiestaError) as caught:
            self(function, ctx=ctx, agent=agent, **arguments)
        return caught.value.to_dict()


def make_tools(tmp_path: Path, **caps: int) -> Iterator[Tools]:
    store = open_sqlite(tmp_path / "siesta.db")
    files = ConversationFiles(store.files, LocalBlobStore(tmp_path / "blobs"), FileSettings())
    yield Tools(files, ContentSettings.model_validate(caps))
    store.close()


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[Tools]:
    yield from make_tools(tmp_path, max_peek_chars=50, max_peek_lines=5, max_grep_matches=4)


# -- list ------------------------------------------------------------------------------


def test_list_sources_newest_first_in_pages(tools: Tools) -> None:
    ids = [tools.upload(f"f{n}.txt", "x") for n in range(3)]
    first = tools("list_content_sources", limit=2)
    second = tools("list_content_sources", limit=2, offset=first["nextOffset"])
    assert [s["fileId"] for s in first["sources"] + second["sources"]] == ids[::-1]
    assert (first["total"], first["nextOffset"], second["nextOffset"]) == (3, 2, None)
    assert first["sources"][0] | {"createdAt": 0} == {
        "fileId": ids[2],
        "name": "f2.txt",
        "kind": "attachment",
        "contentType": "text/plain",
        "size": 1,
        "createdAt": 0,
    }


# -- peek ------------------------------------------------------------------------------

TEXT = "héllo wörld\nsecond line\r\nthird\n"


@pytest.mark.parametrize(
    ("arguments", "content", "start", "end", "next_", "truncated"),
    [
        ({"start": 0, "stop": 5}, "héllo", 0, 5, 5, False),
        ({"start": 6, "stop": 11}, "wörld", 6, 11, 11, False),
        ({}, TEXT, 0, len(TEXT), None, False),
        ({"start": len(TEXT)}, "", len(TEXT), len(TEXT), None, False),
        ({"startLine": 2, "endLine": 3}, "second line\nthird", 2, 3, None, False),
        ({"startLine": 3}, "third", 3, 3, None, False),
        ({"endLine": 1}, "héllo wörld", 1, 1, 2, False),
        ({"startLine": 4}, "", 4, 3, None, False),  # just past the last line: empty
    ],
)
def test_peek_a_character_or_line_range(
    tools: Tools,
    arguments: dict[str, Any],
    content: str,
    start: int,
    end: int,
    next_: int | None,
    truncated: bool,
) -> None:
    file = tools.upload("t.txt", TEXT)
    got = tools("peek_content", file=file, **arguments)
    assert (got["content"], got["start"], got["end"], got["next"], got["truncated"]) == (
        content,
        start,
        end,
        next_,
        truncated,
    )
    assert got["file"] == {"fileId": file, "name": "t.txt"}


def test_peek_is_capped_and_says_where_to_go_on(tools: Tools) -> None:
    file = tools.upload("log.txt", LOG)
    chars = tools("peek_content", file=file, start=0, stop=10_000)
    lines = tools("peek_content", file=file, startLine=1, endLine=100)
    assert (len(chars["content"]), chars["next"], chars["truncated"], chars["limit"]) == (
        50,
        50,
        True,
        50,
    )
    assert chars["content"] == LOG[:50]
    assert (lines["end"], lines["next"], lines["truncated"], lines["limit"]) == (4, 5, True, 5)
    assert lines["content"].splitlines()[-1] == "line 4: ok"  # the 5th passes 50 characters
    again = tools("peek_content", file=file, startLine=lines["next"], endLine=5)
    assert (again["content"], again["next"], again["truncated"]) == ("line 5: ok", 6, False)


def test_a_long_line_is_cut_at_the_character_cap(tools: Tools) -> None:
    file = tools.upload("wide.txt", "x" * 80 + "\nshort\n")
    got = tools("peek_content", file=file, startLine=1)
    assert (got["content"], got["next"], got["truncated"]) == ("x" * 50, 2, True)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"start": 999}, "chars"),
        ({"startLine": 99}, "lines"),
        ({"start": -1}, None),
        ({"start": 5, "stop": 2}, None),
        ({"start": 0, "startLine": 1}, None),
        ({"startLine": 3, "endLine": 2}, None),
    ],
)
def test_bad_ranges_are_invalid_arguments(
    tools: Tools, arguments: dict[str, Any], field: str | None
) -> None:
    file = tools.upload("t.txt", TEXT)
    error = tools.error("peek_content", file=file, **arguments)
    assert error["code"] == "invalid_arguments"
    if field:
        assert error[field] == {"chars": len(TEXT), "lines": 3}[field]


def test_binary_files_are_refused_with_a_hint(tools: Tools) -> None:
    file = tools.upload("img.png", b"\x89PNG\r\n\x1a\n\x00\x00")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("peek_content", {}),
        ("grep_content", {"query": "PNG"}),
    ]
    for function, extra in calls:
        error = tools.error(function, file=file, **extra)
        assert error["code"] == "invalid_arguments" and "sandbox" in error["message"]
    stats = tools("get_content_stats", file=file)
    assert (stats["text"], stats["chars"], stats["contentType"]) == (False, None, "image/png")


# -- grep ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "lines"),
    [
        ({"query": "error"}, [10, 20, 30, 40]),  # case-insensitive by default, capped at 4
        ({"query": "error", "caseSensitive": True}, []),
        ({"query": "ERROR", "caseSensitive": True, "maxMatches": 2}, [10, 20]),
        ({"query": r"line \d*5:", "regex": True}, [5, 15, 25, 35]),
        ({"query": r"line \d*5:"}, []),  # literal unless regex
        ({"query": "ERROR", "startLine": 95}, [100]),
    ],
)
def test_grep_finds_lines(tools: Tools, arguments: dict[str, Any], lines: list[int]) -> None:
    file = tools.upload("log.txt", LOG)
    got = tools("grep_content", file=file, contextLines=0, **arguments)
    assert [m["line"] for m in got["matches"]] == lines


def test_grep_gives_context_and_resumes_after_the_match_cap(tools: Tools) -> None:
    file = tools.upload("log.txt", LOG)
    first = tools("grep_content", file=file, query="disk full", contextLines=1)
    assert first["matches"][0] == {
        "line": 10,
        "text": "line 10: ERROR disk full",
        "before": ["line 9: ok"],
        "after": ["line 11: ok"],
        "cut": False,
    }
    assert (first["nextLine"], first["stoppedAt"], first["limitMatches"]) == (50, "maxMatches", 4)
    rest = tools("grep_content", file=file, query="disk full", startLine=first["nextLine"])
    assert [m["line"] for m in rest["matches"]] == [50, 60, 70, 80]
    last = tools("grep_content", file=file, query="disk full", startLine=rest["nextLine"])
    assert ([m["line"] for m in last["matches"]], last["nextLine"], last["truncated"]) == (
        [90, 100],
        None,
        False,
    )
    assert last["matches"][-1]["after"] == []


def test_grep_stops_at_the_scan_cap_and_resumes(tmp_path: Path) -> None:
    for small in make_tools(tmp_path, max_scan_chars=120):
        file = small.upload("log.txt", LOG)
        seen: list[int] = []
        start, calls = 1, 0
        while start is not None:
            got = small("grep_content", file=file, query="ERROR", startLine=start, contextLines=0)
            assert got["stoppedAt"] in ("scanChars", None) and got["limitScanChars"] == 120
            seen += [m["line"] for m in got["matches"]]
            start, calls = got["nextLine"], calls + 1
        assert seen == list(range(10, 101, 10))
        assert calls > 10


@pytest.mark.parametrize(
    ("arguments", "limit"),
    [({"query": "x" * 501}, 500), ({"query": "(", "regex": True}, None), ({"query": ""}, None)],
)
def test_bad_queries_are_invalid_arguments(
    tools: Tools, arguments: dict[str, Any], limit: int | None
) -> None:
    file = tools.upload("log.txt", LOG)
    error = tools.error("grep_content", file=file, **arguments)
    assert error["code"] == "invalid_arguments"
    assert error.get("limit") == limit


def test_long_lines_are_cut_in_grep_results(tmp_path: Path) -> None:
    for small in make_tools(tmp_path, max_line_chars=20):
        file = small.upload("wide.txt", "a" * 30 + "needle\nb\n")
        match = small("grep_content", file=file, query="needle")["matches"][0]
        assert (match["text"], match["cut"], match["after"]) == ("a" * 20, True, ["b"])


# -- stats -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "chars", "lines", "words"),
    [
        ("", 0, 0, 0),
        ("one", 3, 1, 1),
        ("one two\n", 8, 1, 2),
        ("a\nb c\n\nd", 8, 4, 4),
        (TEXT, len(TEXT), 3, 5),
    ],
)
def test_stats_count_characters_lines_and_words(
    tools: Tools, text: str, chars: int, lines: int, words: int
) -> None:
    file = tools.upload("t.txt", text)
    got = tools("get_content_stats", file=file)
    assert (got["chars"], got["lines"], got["words"], got["size"]) == (
        chars,
        lines,
        words,
        len(text.encode()),
    )
    assert (got["text"], got["complete"], got["contentType"]) == (True, True, "text/plain")


def test_stats_say_when_the_scan_cap_cut_them(tmp_path: Path) -> None:
    for small in make_tools(tmp_path, max_scan_chars=100):
        got = small("get_content_stats", file=small.upload("log.txt", LOG))
        assert (got["chars"], got["complete"], got["limitScanChars"]) == (100, False, 100)


# -- isolation and gating ----------------------------------------------------------------


@pytest.mark.parametrize(
    "other",
    [CallContext("org", "user", "other-conv"), CallContext("other-org", "user", "conv")],
)
@pytest.mark.parametrize(
    ("function", "extra"),
    [
        ("peek_content", {}),
        ("grep_content", {"query": "x"}),
        ("get_content_stats", {}),
    ],
)
def test_another_conversations_file_is_not_found(
    tools: Tools, other: CallContext, function: str, extra: dict[str, Any]
) -> None:
    file = tools.upload("secret.txt", "x")
    with pytest.raises(MissingInput):
        tools(function, ctx=other, file=file, **extra)
    with pytest.raises(MissingInput):
        tools(function, ctx=other, file="secret.txt", **extra)
    assert tools("list_content_sources", ctx=other)["sources"] == []


@pytest.mark.parametrize(
    ("assigned", "offered"),
    [(["content"], True), ([], False), (["sandbox", "js_executor"], False)],
)
def test_the_content_tools_come_with_their_system_tool(
    tmp_path: Path, assigned: list[str], offered: bool
) -> None:
    catalog = build_catalog(
        AgentConfig.model_validate({"id": "a", "systemToolIds": assigned, "baseImage": "b"}),
        UserInfo(id="u", role="User"),
        ToolSettings(),
        ImageCatalog([CatalogImage(id="b", title="B", image="b:1")], tmp_path),
        sandbox_enabled=True,
    )
    names = {
        "list_content_sources",
        "load_content",
        "peek_content",
        "grep_content",
        "get_content_stats",
    }
    found = {f.name: f for f in catalog.functions if f.name in names}
    assert set(found) == (names if offered else set())
    if offered:
        peek = found["peek_content"]
        assert (peek.source, peek.policy, peek.group) == ("system:content", "enabled", "System")
        assert set(peek.parameters["properties"]) == {
            "file",
            "start",
            "stop",
            "startLine",
            "endLine",
        }
        assert peek.parameters["required"] == ["file"]


def test_bad_arguments_are_refused_by_the_published_schema(tools: Tools) -> None:
    with pytest.raises(InvalidArguments):
        tools("get_content_stats", file="x", extra=1)


# -- load, and the run's own content ------------------------------------------------------


def test_load_gives_the_whole_text_in_capped_pages(tmp_path: Path) -> None:
    for tools in make_tools(tmp_path, max_load_chars=1000):
        file = tools.upload("app.log", LOG)
        first = tools("load_content", file=file)
        assert (first["unit"], first["start"], first["limit"]) == ("chars", 0, 1000)
        assert first["content"] == LOG[:1000] and first["truncated"] is True
        rest = tools("load_content", file="app.log", offset=first["next"])
        assert rest["content"] == LOG[1000:] and rest["next"] is None
        assert tools("load_content", file=file, offset=None)["content"] == LOG[:1000]


def test_a_run_that_names_its_content_reads_it_by_default(tools: Tools) -> None:
    """The reference's scenario 2a: the run's metadata names the content item; the
    tools take it when the model names none, and another file can still be named."""
    tools.upload("notes.txt", "one\ntwo\n")
    report = tools.upload("report.txt", "alpha\nbeta ERROR\n")
    run = {"contentDefault": report}
    assert tools("get_content_stats", agent=run)["file"]["name"] == "report.txt"
    assert tools("load_content", agent=run)["content"] == "alpha\nbeta ERROR\n"
    assert [m["line"] for m in tools("grep_content", agent=run, query="error")["matches"]] == [2]
    assert tools("peek_content", agent=run, file="notes.txt")["content"] == "one\ntwo\n"
    error = tools.error("peek_content")  # no file and no default
    assert error["code"] == "invalid_arguments" and "contentDefault" in error["message"]


def test_the_catalog_shows_the_default_and_leaves_out_the_listing(tmp_path: Path) -> None:
    def catalog_of(agent: dict[str, Any]) -> dict[str, Any]:
        config = {"id": "a", "systemToolIds": ["content"], **agent}
        catalog = build_catalog(
            AgentConfig.model_validate(config),
            UserInfo(id="u", role="User"),
            ToolSettings(),
            ImageCatalog([], tmp_path),
            sandbox_enabled=False,
        )
        return {f.name: f.parameters for f in catalog.functions}

    discovering = catalog_of({})
    assert "list_content_sources" in discovering
    assert discovering["grep_content"]["required"] == ["file", "query"]
    file = discovering["load_content"]["properties"]["file"]
    assert file["type"] == "string" and "default" not in file and "anyOf" not in file
    known = catalog_of({"contentDefault": "file-7"})
    assert "list_content_sources" not in known
    assert known["grep_content"]["required"] == ["query"]
    assert known["load_content"]["properties"]["file"]["default"] == "file-7"
