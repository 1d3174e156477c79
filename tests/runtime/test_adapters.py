"""Every thin adapter against real local HTTP servers: success, documented failures,
bad input."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from runtime.core.errors import SiestaError
from runtime.core.upstreams import Upstreams
from runtime.files.conversation import ConversationFiles, LocalBlobStore
from runtime.files.settings import FileSettings
from runtime.store.sqlite import open_sqlite
from runtime.tools.adapters.connections import connection_adapter
from runtime.tools.adapters.help import help_adapter
from runtime.tools.adapters.image import image_adapter
from runtime.tools.adapters.search import firecrawl_adapters, google_search_adapter
from runtime.tools.adapters.web import web_fetch_adapter
from runtime.tools.docs_topics import TOPICS, heading_anchor
from runtime.tools.settings import ToolSettings
from tests.fake_apis import PNG, FakeApis
from tests.helpers import REPO, tool_call

CTX = tool_call()
UPSTREAMS = Upstreams(timeout_seconds=1.5)


@pytest.fixture(scope="module")
def apis() -> Iterator[FakeApis]:
    server = FakeApis()
    yield server
    server.stop()


def settings(apis: FakeApis, **overrides: Any) -> ToolSettings:
    return ToolSettings.model_validate(
        {
            "allow_private_networks": True,
            "http_timeout_seconds": 1.5,
            "context_chars": 200,
            "google_base_url": apis.url,
            "google_api_key": "good-key",
            "google_cx": "cx-1",
            "firecrawl_base_url": apis.url,
            "firecrawl_api_key": "good-key",
            "crawl_poll_seconds": 0.05,
            "crawl_timeout_seconds": 0.5,
            "openai_base_url": apis.url,
            "openai_api_key": "good-key",
            "platform_base_url": apis.url,
            "connections_url": f"{apis.url}/connections",
            **overrides,
        }
    )


def fails(code: str, action: Any, *args: Any) -> SiestaError:
    with pytest.raises(SiestaError) as caught:
        action(*args)
    assert caught.value.code == code, caught.value.to_dict()
    return caught.value


# -- web_fetch -----------------------------------------------------------------------------


def test_web_fetch_returns_the_peer_format(apis: FakeApis) -> None:
    text = web_fetch_adapter(settings(apis), UPSTREAMS)(CTX, {"url": f"{apis.url}/pages/redirect"})
    assert text.startswith(f"URL: {apis.url}/pages/a\nTitle: Page A title\n")
    assert (
        "Description: About page A\nContent:\nHeading A\nFirst paragraph of A.\nPoint one" in text
    )
    for removed in ("var secret", "Menu items", "Site header", "Footer text", "color: red"):
        assert removed not in text


def test_web_fetch_refuses_local_addresses_by_default(apis: FakeApis) -> None:
    fetch = web_fetch_adapter(settings(apis, allow_private_networks=False), UPSTREAMS)
    for url in (f"{apis.url}/pages/a", "http://169.254.169.254/latest/", "http://10.0.0.1/"):
        assert "not allowed" in fails("url_not_allowed", fetch, CTX, {"url": url}).message
    fails("url_not_allowed", fetch, CTX, {"url": "file:///etc/passwd"})


def test_web_fetch_failures_and_bad_input(apis: FakeApis) -> None:
    fetch = web_fetch_adapter(settings(apis), UPSTREAMS)
    assert fails("fetch_failed", fetch, CTX, {"url": f"{apis.url}/nope"}).fields["status"] == 404
    fails("invalid_arguments", fetch, CTX, {"link": "x"})


# -- GoogleSearch.Search ---------------------------------------------------------------------


def test_google_search_clamps_fetches_and_extracts(apis: FakeApis) -> None:
    search = google_search_adapter(settings(apis), UPSTREAMS)
    result = search(CTX, {"query": "siesta", "count": 50, "timePeriod": "w1"})
    sent = [r for r in apis.requests if r["path"] == "/customsearch/v1"][-1]["query"]
    assert (sent["num"], sent["gl"], sent["dateRestrict"], sent["cx"]) == ("10", "cz", "w1", "cx-1")
    first, gone = result["results"]
    assert (first["title"], first["snippet"]) == ("A", "snip a")
    assert first["context"].startswith("Heading A\nFirst paragraph")
    assert gone["context"] is None  # an unreachable page leaves the snippet
    search(CTX, {"query": "siesta", "count": 0})
    assert [r for r in apis.requests if r["path"] == "/customsearch/v1"][-1]["query"]["num"] == "1"
    assert search(CTX, {"query": "q"})["results"][0]["url"].endswith("/pages/a")


def test_google_search_in_strict_mode_sends_the_defaults(apis: FakeApis) -> None:
    """A strict model's call, every optional property null: the request our code sends
    is the one for the query alone (3 results, country cz, no date restriction)."""
    search = google_search_adapter(settings(apis), UPSTREAMS)
    search(CTX, {"query": "siesta", "count": None, "country": None, "timePeriod": None})
    sent = [r for r in apis.requests if r["path"] == "/customsearch/v1"][-1]["query"]
    assert (sent["q"], sent["num"], sent["gl"]) == ("siesta", "3", "cz")
    assert "dateRestrict" not in sent


def test_google_search_lists_urls_and_a_view_on_google_button(apis: FakeApis) -> None:
    search = google_search_adapter(settings(apis), UPSTREAMS)
    result = search(CTX, {"query": "siesta runtime", "country": "us", "timePeriod": "w1"})
    assert result["urls"] == [r["url"] for r in result["results"]] and result["urls"]
    expected = "https://www.google.com/search?q=siesta+runtime&gl=us&tbs=qdr%3Aw1"
    assert result["googleUrl"] == expected
    assert result["button"] == {"label": "View on Google", "kind": "open_url", "url": expected}
    assert result["notes"] == [] and result["deadlineSeconds"] == 20
    plain = search(CTX, {"query": "a&b"})
    assert plain["googleUrl"] == "https://www.google.com/search?q=a%26b&gl=cz"


def test_google_search_has_one_deadline_for_all_pages(apis: FakeApis) -> None:
    """Four pages of 3 s each under a 1.5 s deadline: the call ends near the deadline
    (not 4 x the per-page timeout), the fast page has context, the slow ones null."""
    search = google_search_adapter(
        settings(apis, search_deadline_seconds=1.5, http_timeout_seconds=5), UPSTREAMS
    )
    started = time.monotonic()
    result = search(CTX, {"query": "delayed:4:3", "count": 5})
    took = time.monotonic() - started
    assert 1.4 < took < 2.2, took
    fast, *slow = result["results"]
    assert fast["context"].startswith("Heading A") and fast["contextError"] is None
    assert [r["context"] for r in slow] == [None] * 4
    assert all("limit of 1.5 seconds" in r["contextError"] for r in slow)
    assert [r["snippet"] for r in slow] == [f"snip slow {i}" for i in range(4)]
    (note,) = result["notes"]
    assert "4 of 5" in note and "1.5 seconds" in note and "SEARCH_DEADLINE_SECONDS" in note


def test_google_search_fetches_pages_at_once_within_a_bound(apis: FakeApis) -> None:
    """Eight pages of 0.4 s: all read, in about two rounds with four at once (not 3.2 s)."""
    search = google_search_adapter(
        settings(apis, search_parallel_fetches=4, http_timeout_seconds=5), UPSTREAMS
    )
    started = time.monotonic()
    result = search(CTX, {"query": "delayed:8:0.4", "count": 9})
    took = time.monotonic() - started
    assert 0.8 <= took < 1.6, took
    assert all(r["context"] for r in result["results"]) and result["notes"] == []


def test_google_search_request_itself_is_under_the_deadline(apis: FakeApis) -> None:
    search = google_search_adapter(
        settings(apis, search_deadline_seconds=0.5, http_timeout_seconds=5), UPSTREAMS
    )
    started = time.monotonic()
    error = fails("provider_failed", search, CTX, {"query": "slow"})
    assert time.monotonic() - started < 1.2
    assert "limit of 0.5 seconds" in error.message and error.fields["limit"] == 0.5


def test_google_search_failures(apis: FakeApis) -> None:
    search = google_search_adapter(settings(apis), UPSTREAMS)
    assert (
        "HTTP 403"
        in fails(
            "provider_failed",
            google_search_adapter(settings(apis, google_api_key="bad"), UPSTREAMS),
            CTX,
            {"query": "q"},
        ).message
    )
    assert "not JSON" in fails("provider_failed", search, CTX, {"query": "malformed"}).message
    assert "did not answer" in fails("provider_failed", search, CTX, {"query": "slow"}).message
    fails("invalid_arguments", search, CTX, {"query": ""})
    fails(
        "tool_not_configured",
        google_search_adapter(settings(apis, google_cx=None), UPSTREAMS),
        CTX,
        {"query": "q"},
    )


# -- Firecrawl --------------------------------------------------------------------------------


def test_firecrawl_functions(apis: FakeApis) -> None:
    fire = firecrawl_adapters(settings(apis), UPSTREAMS)
    apis.crawl_polls = 0
    assert fire["ScrapePageAsync"](CTX, {"url": "https://x"}) == {
        "url": "https://x",
        "title": "Hello page",
        "markdown": "# Hello",
    }
    crawl = fire["CrawlSiteAsync"](CTX, {"url": "https://site", "limit": 5})
    assert [p["url"] for p in crawl["pages"]] == ["https://s/1", "https://s/2"]
    assert "# https://s/1\n# One" in crawl["markdown"]
    assert fire["MapSiteAsync"](CTX, {"url": "https://site", "limit": 2})["links"] == [
        "https://s/1",
        "https://s/2",
    ]
    assert fire["SearchWebAsync"](CTX, {"query": "q"})["results"] == [
        {"url": "https://r/1", "title": "R1", "content": "d1"}
    ]


@pytest.mark.parametrize(
    ("function", "arguments", "path", "expected"),
    [
        (
            "ScrapePageAsync",
            {"url": "https://x"},
            "/v1/scrape",
            {"url": "https://x", "formats": ["markdown"], "onlyMainContent": True},
        ),
        (
            "ScrapePageAsync",
            {"url": "https://x", "onlyMainContent": False},
            "/v1/scrape",
            {"url": "https://x", "formats": ["markdown"], "onlyMainContent": False},
        ),
        (
            "CrawlSiteAsync",
            {"url": "https://site", "limit": 5, "includePaths": ["/docs/*"]},
            "/v1/crawl",
            {"url": "https://site", "limit": 5, "includePaths": ["/docs/*"], "excludePaths": []},
        ),
        ("MapSiteAsync", {"url": "https://site"}, "/v1/map", {"url": "https://site", "limit": 100}),
        (
            "MapSiteAsync",
            {"url": "https://site", "search": "docs", "limit": 2},
            "/v1/map",
            {"url": "https://site", "limit": 2, "search": "docs"},
        ),
        ("SearchWebAsync", {"query": "q"}, "/v1/search", {"query": "q", "limit": 5}),
        ("SearchWebAsync", {"query": "q", "limit": None}, "/v1/search", {"query": "q", "limit": 5}),
    ],
)
def test_each_firecrawl_call_sends_exactly_this(
    apis: FakeApis, function: str, arguments: dict[str, Any], path: str, expected: dict[str, Any]
) -> None:
    apis.crawl_polls = 0
    before = len(apis.requests)
    firecrawl_adapters(settings(apis), UPSTREAMS)[function](CTX, arguments)
    first = apis.requests[before]
    assert (first["method"], first["path"], first["body"]) == ("POST", path, expected)
    assert first["headers"]["Authorization"] == "Bearer good-key"
    if function == "CrawlSiteAsync":  # then its status, polled by the job's id
        polls = apis.requests[before + 1 :]
        assert polls and {(r["method"], r["path"]) for r in polls} == {("GET", "/v1/crawl/job-1")}


def test_firecrawl_failure_modes(apis: FakeApis) -> None:
    fire = firecrawl_adapters(settings(apis), UPSTREAMS)
    assert (
        "HTTP 500"
        in fails(
            "provider_failed", fire["ScrapePageAsync"], CTX, {"url": "https://fail.example"}
        ).message
    )
    timeout = fails("crawl_timeout", fire["CrawlSiteAsync"], CTX, {"url": "https://forever"})
    assert timeout.fields["limit"] == 0.5
    assert (
        "HTTP 401"
        in fails(
            "provider_failed",
            firecrawl_adapters(settings(apis, firecrawl_api_key="bad"), UPSTREAMS)["MapSiteAsync"],
            CTX,
            {"url": "https://x"},
        ).message
    )
    assert (
        "failed"
        in fails("provider_failed", fire["CrawlSiteAsync"], CTX, {"url": "https://failed"}).message
    )
    empty = fire["CrawlSiteAsync"](CTX, {"url": "https://empty"})
    assert (empty["pages"], empty["markdown"]) == ([], "")
    fails("invalid_arguments", fire["CrawlSiteAsync"], CTX, {"url": "https://x", "limit": 0})
    fails(
        "tool_not_configured",
        firecrawl_adapters(settings(apis, firecrawl_api_key=None), UPSTREAMS)["SearchWebAsync"],
        CTX,
        {"query": "q"},
    )


# -- image_generation -------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> Iterator[ConversationFiles]:
    store = open_sqlite(tmp_path / "s.db")
    yield ConversationFiles(store.files, LocalBlobStore(tmp_path / "blobs"), FileSettings())
    store.close()


def test_image_generation_stores_the_png_as_an_artifact(
    apis: FakeApis, files: ConversationFiles
) -> None:
    generate = image_adapter(settings(apis), files, UPSTREAMS)
    result = generate(CTX, {"prompt": "a cat"})
    first, second = result["artifact"], generate(CTX, {"prompt": "a dog"})["artifact"]
    request = [r for r in apis.requests if r["path"] == "/v1/images/generations"][-1]
    assert request["body"]["model"] == "gpt-image-2" and "size" not in request["body"]
    assert result["size"] == "auto" and result["messageId"] is None
    for artifact in (first, second):
        assert re.fullmatch(r"generated-image-[0-9a-f]{12}\.png", artifact["name"])
    assert first["name"] != second["name"]
    assert first["contentType"] == "image/png" and first["messageId"] is None
    assert b"".join(files.chunks(files.get(CTX.ctx, first["id"]))) == PNG


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ({"size": "1536x1024"}, "1536x1024"),
        ({"size": "auto"}, "auto"),
        ({"aspectRatio": "square"}, "1024x1024"),
        ({"aspectRatio": "landscape"}, "1536x1024"),
        ({"aspectRatio": "portrait"}, "1024x1536"),
        ({"aspectRatio": "portrait", "size": "1024x1536"}, "1024x1536"),  # agreeing
    ],
)
def test_image_generation_forwards_the_size(
    apis: FakeApis, files: ConversationFiles, arguments: dict[str, Any], sent: str
) -> None:
    result = image_adapter(settings(apis), files, UPSTREAMS)(CTX, {"prompt": "x", **arguments})
    request = [r for r in apis.requests if r["path"] == "/v1/images/generations"][-1]
    assert request["body"]["size"] == sent and result["size"] == sent


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"size": "512x512"}, "size"),  # a dall-e size, not a gpt-image one
        ({"size": "1792x1024"}, "size"),
        ({"aspectRatio": "wide"}, "aspectRatio"),
        ({"aspectRatio": "landscape", "size": "1024x1536"}, "conflicts with aspectRatio"),
        ({"aspectRatio": "square", "size": "auto"}, "conflicts with aspectRatio"),
        # the message is the backend's to say, never the model's
        ({"messageId": "msg-42"}, "messageId: Extra inputs are not permitted"),
    ],
)
def test_image_generation_refuses_bad_shapes(
    apis: FakeApis, files: ConversationFiles, arguments: dict[str, Any], message: str
) -> None:
    before = len(apis.requests)
    generate = image_adapter(settings(apis), files, UPSTREAMS)
    error = fails("invalid_arguments", generate, CTX, {"prompt": "x", **arguments})
    assert message in error.message
    assert len(apis.requests) == before and files.list_files(CTX.ctx) == []


def test_image_generation_ties_the_artifact_to_the_calls_message(
    apis: FakeApis, files: ConversationFiles
) -> None:
    generate = image_adapter(settings(apis), files, UPSTREAMS)
    call = dataclasses.replace(CTX, ctx=dataclasses.replace(CTX.ctx, message="msg-42"))
    result = generate(call, {"prompt": "a cat"})
    assert result["messageId"] == "msg-42" and result["artifact"]["messageId"] == "msg-42"
    assert files.get(CTX.ctx, result["artifact"]["id"]).message_id == "msg-42"
    (listed,) = files.list_files(CTX.ctx)
    assert listed.message_id == "msg-42"


def test_concurrent_image_generations_get_distinct_names(
    apis: FakeApis, files: ConversationFiles
) -> None:
    generate = image_adapter(settings(apis), files, UPSTREAMS)
    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda i: generate(CTX, {"prompt": f"slow {i}"}), range(12)))
    names = [r["artifact"]["name"] for r in results]
    assert len(set(names)) == 12, names
    assert sorted(f.name for f in files.list_files(CTX.ctx)) == sorted(names)


def test_image_generation_failures(apis: FakeApis, files: ConversationFiles) -> None:
    generate = image_adapter(settings(apis), files, UPSTREAMS)
    assert "rejected" in fails("provider_failed", generate, CTX, {"prompt": "forbidden"}).message
    assert "not a PNG" in fails("provider_failed", generate, CTX, {"prompt": "not a png"}).message
    fails("invalid_arguments", generate, CTX, {"prompt": ""})
    assert files.list_files(CTX.ctx) == []


# -- siesta_help_resolve and connections ------------------------------------------------------


def gmail(*functions: dict[str, Any]) -> dict[str, Any]:
    return {"connections": [{"id": "gmail-shared", "kind": "shared", "functions": list(functions)}]}


BARE: dict[str, Any] = {}
GMAIL = gmail({"name": "Gmail.SendEmail"}, {"name": "Gmail.ListMessages"})
GMAIL_SEND_OFF = gmail({"name": "Gmail.SendEmail", "policy": "disabled"})
GMAIL_READ_ONLY = gmail({"name": "Gmail.ListMessages"})
SEARCH_ON = {"systemToolIds": ["google_search"]}
ORCHESTRATION = {"systemToolIds": ["orchestration"]}
SUB_AGENTS = {"systemToolIds": ["orchestration"], "subAgents": ["writer"]}
USER_GMAIL = {"targetService": "Gmail", "targetServiceMentionedByUser": True}
WRITER = {"targetAgentName": "Writer", "targetAgentMentionedByUser": True}

# (rule of the module docstring, agent, arguments, state, what else the answer holds)
HELP_TABLE: list[tuple[str, dict[str, Any], dict[str, Any], str, dict[str, Any]]] = [
    (
        "1 docs",
        BARE,
        {"intent": "platform_docs", "topic": "workflows"},
        "docs",
        {"docs.topic": "javascript", "docs.section": "JavaScript executor", "docs.url": None},
    ),
    (
        "1 docs",
        BARE,
        {"topic": "agents"},
        "docs",
        {"docs.anchor": "tool-catalog-execution-and-approvals"},
    ),
    ("1 docs", BARE, {"topic": "../../etc/passwd"}, "unknown_topic", {"docs": None}),
    ("1 docs", BARE, {"intent": "platform_docs"}, "docs", {"docs.topic": "tools"}),
    ("1 not docs", BARE, {"topic": "email", "capability": "email.send"}, "needs_service", {}),
    (
        "2 other agent",
        GMAIL,
        {**USER_GMAIL, **WRITER},
        "needs_assignment",
        {"action.agent": "Writer", "action.connections": ["gmail-shared"]},
    ),
    (
        "2 other agent, service unknown here",
        BARE,
        {"targetServices": ["Slack"], **WRITER},
        "needs_assignment",
        {"action.connections": []},
    ),
    (
        "2 not mentioned: this agent",
        GMAIL,
        {**USER_GMAIL, "targetAgentName": "Writer"},
        "ready",
        {},
    ),
    (
        "2 names this agent",
        GMAIL,
        {**USER_GMAIL, "targetAgentId": "agent-1", "targetAgentMentionedByUser": True},
        "ready",
        {},
    ),
    (
        "3 diagnostics",
        GMAIL,
        {"intent": "connection_diagnostics", "targetServices": ["Gmail", "Slack"]},
        "diagnostics",
        {"missing": ["Slack"], "action.services": ["Slack"], "connected.0.id": "gmail-shared"},
    ),
    (
        "3 diagnostics, nothing connected",
        BARE,
        {"intent": "connection_diagnostics", "capability": "email.send"},
        "diagnostics",
        {"connected": [], "missing": ["a email connection (Gmail or Outlook)"]},
    ),
    (
        "3 diagnostics, all there",
        GMAIL,
        {"intent": "connection_diagnostics", "capability": "email.send"},
        "diagnostics",
        {"missing": [], "connected.0.functions": ["Gmail.SendEmail", "Gmail.ListMessages"]},
    ),
    (
        "3 diagnostics, System Tool",
        ORCHESTRATION,
        {"intent": "connection_diagnostics", "capability": "agents.call"},
        "diagnostics",
        {"missing": ["sub-agents"], "subAgents": []},
    ),
    ("4 tool on", SEARCH_ON, {"capability": "web.search"}, "ready", {}),
    (
        "4 tool off",
        BARE,
        {"capability": "web.search"},
        "needs_system_tool",
        {"action.tool": "google_search", "action.kind": "enable_system_tool"},
    ),
    ("4 no sub-agents", ORCHESTRATION, {"capability": "agents.call"}, "needs_sub_agents", {}),
    ("4 sub-agents", SUB_AGENTS, {"capability": "agents.call"}, "ready", {}),
    ("5 generic email", BARE, {"capability": "email.send"}, "needs_service", {}),
    ("5 named by the model", BARE, {"targetService": "Gmail"}, "needs_service", {}),
    ("5 connected Gmail counts", GMAIL, {"capability": "email.send"}, "ready", {}),
    (
        "5 the capability names it",
        BARE,
        {"capability": "slack.send_message"},
        "needs_connection",
        {"action.services": ["Slack"]},
    ),
    ("6 connected", GMAIL, {**USER_GMAIL, "capability": "email.send"}, "ready", {}),
    (
        "6 connected, setup asked",
        GMAIL,
        {**USER_GMAIL, "intent": "connection_setup"},
        "ready",
        {},
    ),
    (
        "6 function disabled",
        GMAIL_SEND_OFF,
        {**USER_GMAIL, "capability": "email.send"},
        "needs_function",
        {"action.kind": "enable_function", "action.functions": ["Gmail.SendEmail"]},
    ),
    (
        "6 no such function",
        GMAIL_READ_ONLY,
        {**USER_GMAIL, "capability": "email.send"},
        "needs_function",
        {"action.connections": ["gmail-shared"]},
    ),
    (
        "7 connect",
        BARE,
        USER_GMAIL,
        "needs_connection",
        {"action.kind": "setup_connection", "action.services": ["Gmail"]},
    ),
    (
        "7 connect only the missing one",
        GMAIL,
        {"targetServices": ["Gmail", "Slack"]},
        "needs_connection",
        {"action.services": ["Slack"]},
    ),
    (
        "7 assign",
        BARE,
        {**USER_GMAIL, "intent": "connection_assignment"},
        "needs_assignment",
        {"action.agent": "agent-1"},
    ),
    (
        "7 assign by capability",
        BARE,
        {**USER_GMAIL, "capability": "connections.assign"},
        "needs_assignment",
        {},
    ),
    ("8 ask", BARE, {}, "needs_service", {}),
    ("8 ask, other connections", GMAIL, {"targetService": "Slack"}, "needs_service", {}),
]


def _at(answer: Any, path: str) -> Any:
    for part in path.split("."):
        answer = answer[int(part)] if isinstance(answer, list) else answer.get(part)
    return answer


@pytest.mark.parametrize(
    ("agent", "arguments", "state", "holds"),
    [pytest.param(*case[1:], id=case[0]) for case in HELP_TABLE],
)
def test_help_follows_its_rules(
    agent: dict[str, Any], arguments: dict[str, Any], state: str, holds: dict[str, Any]
) -> None:
    answer = help_adapter()(tool_call(agent=agent), {"userRequest": "help me", **arguments})
    assert answer["state"] == state, answer
    assert answer["title"] and answer["message"]
    for path, value in holds.items():
        assert _at(answer, path) == value, (path, answer)
    if state.startswith("needs_") and state != "needs_service":
        assert answer["action"]["label"]


@pytest.mark.parametrize(
    "case", [case for case in HELP_TABLE if case[1] is not BARE], ids=lambda case: case[0]
)
def test_help_never_says_connect_what_is_connected(
    case: tuple[str, dict[str, Any], dict[str, Any], str, dict[str, Any]],
) -> None:
    _, agent, arguments, _, _ = case
    answer = help_adapter()(tool_call(agent=agent), {"userRequest": "x", **arguments})
    text = f"{answer['title']} {answer['message']}"
    assert "Connect Gmail" not in text and "Connect Gmail" not in str(answer.get("action"))
    if answer.get("action", {}).get("kind") == "setup_connection":
        assert "Gmail" not in answer["action"]["services"]


def test_every_documentation_topic_is_a_section_of_its_page() -> None:
    for topic in TOPICS:
        headings = {
            line.lstrip("#").strip()
            for line in (REPO / topic.page).read_text().splitlines()
            if re.match(r"#{1,3} ", line)
        }
        assert topic.section in headings, topic
    assert heading_anchor("Safe retries (`Idempotency-Key`)") == "safe-retries-idempotency-key"
    assert heading_anchor("Living in a sandbox: ports, snapshots, metrics, pause") == (
        "living-in-a-sandbox-ports-snapshots-metrics-pause"
    )


def test_help_links_a_section_only_where_the_docs_are_published() -> None:
    base = "https://example.com/siesta/blob/main/"
    answer = help_adapter(base)(tool_call(), {"userRequest": "x", "topic": "E2B sandboxes"})
    expected = "https://example.com/siesta/blob/main/docs/guides/e2b.md#e2b-compatibility"
    assert answer["docs"]["url"] == expected
    unknown = help_adapter(base)(tool_call(), {"userRequest": "x", "topic": "quantum knitting"})
    assert unknown["state"] == "unknown_topic" and "docs" not in unknown
    assert "e2b" in unknown["topics"] and "quantum knitting" in unknown["message"]


def test_help_reads_the_call_not_only_the_arguments() -> None:
    """The same arguments, two agents: the answer follows each one's configuration."""
    arguments = {"userRequest": "send mail with gmail", **USER_GMAIL, "capability": "email.send"}
    assert help_adapter()(tool_call(agent=BARE), arguments)["state"] == "needs_connection"
    assert help_adapter()(tool_call(agent=GMAIL), arguments)["state"] == "ready"
    fails("invalid_arguments", help_adapter(), CTX, {"capability": "email.send"})


@pytest.mark.parametrize(
    ("connection", "kind", "group"),
    [("team-gmail", "shared", "Shared"), ("my-gmail", "private", "Private")],
)
def test_connection_functions_say_whose_credential(
    apis: FakeApis, connection: str, kind: str, group: str
) -> None:
    call = tool_call("Gmail.Send", source=f"connection:{connection}", group=group)
    send = connection_adapter(settings(apis), UPSTREAMS)("Gmail.Send")
    assert send(call, {"to": "a@b.c"}) == {"sent": True, "function": "Gmail.Send"}
    sent = [r for r in apis.requests if r["path"] == "/connections"][-1]["body"]
    assert sent == {
        "function": "Gmail.Send",
        "arguments": {"to": "a@b.c"},
        "connection": {"id": connection, "kind": kind},
        "context": {
            "org": "org",
            "user": "user",
            "agentId": "agent-1",
            "conversationId": "conv",
        },
    }


def test_a_strict_call_of_a_connection_function_leaves_out_its_null_optionals(
    apis: FakeApis,
) -> None:
    """Null for an optional property is "not given" (as for the system functions),
    unless the connection's schema takes null as a value; anything else is sent as it is."""
    parameters = {
        "type": "object",
        "properties": {
            "to": {"type": "string"},
            "cc": {"type": "string"},
            "label": {"type": ["string", "null"]},
            "subject": {"type": "string"},
        },
        "required": ["to", "subject"],
    }
    call = tool_call("Gmail.Send", source="connection:c1", group="Shared", parameters=parameters)
    send = connection_adapter(settings(apis), UPSTREAMS)("Gmail.Send")
    send(call, {"to": "a@b.c", "cc": None, "label": None, "subject": None, "extra": None})
    sent = [r for r in apis.requests if r["path"] == "/connections"][-1]["body"]["arguments"]
    assert sent == {"to": "a@b.c", "label": None, "subject": None, "extra": None}


def test_connection_functions_need_a_connection_and_the_gateway(apis: FakeApis) -> None:
    before = len(apis.requests)
    error = fails(
        "function_not_available",
        connection_adapter(settings(apis), UPSTREAMS)("Gmail.Send"),
        CTX,  # a System Tool's call: no connection, so no credential to use
        {},
    )
    assert "not a connection function" in error.message
    assert len(apis.requests) == before
    fails(
        "tool_not_configured",
        connection_adapter(settings(apis, connections_url=None), UPSTREAMS)("X"),
        tool_call("X", source="connection:c1", group="Shared"),
        {},
    )
