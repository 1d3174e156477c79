"""Every thin adapter against real local HTTP servers: success, documented failures,
bad input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.config import FileSettings, ToolSettings
from runtime.errors import SiestaError
from runtime.files import ConversationFiles, LocalBlobStore
from runtime.store.sqlite import open_sqlite
from runtime.tools.adapters.connections import connection_adapter
from runtime.tools.adapters.help import help_adapter
from runtime.tools.adapters.image import image_adapter
from runtime.tools.adapters.search import firecrawl_adapters, google_search_adapter
from runtime.tools.adapters.web import web_fetch_adapter
from runtime.upstreams import Upstreams
from tests.fake_apis import PNG, FakeApis
from tests.helpers import tool_call

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
    first = generate(CTX, {"prompt": "a cat"})["artifact"]
    second = generate(CTX, {"prompt": "a dog"})["artifact"]
    request = [r for r in apis.requests if r["path"] == "/v1/images/generations"][-1]
    assert request["body"]["model"] == "gpt-image-2"
    assert (first["name"], second["name"]) == ("generated-image-1.png", "generated-image-2.png")
    assert first["contentType"] == "image/png"
    assert b"".join(files.chunks(files.get(CTX.ctx, first["id"]))) == PNG


def test_image_generation_failures(apis: FakeApis, files: ConversationFiles) -> None:
    generate = image_adapter(settings(apis), files, UPSTREAMS)
    assert "rejected" in fails("provider_failed", generate, CTX, {"prompt": "forbidden"}).message
    assert "not a PNG" in fails("provider_failed", generate, CTX, {"prompt": "not a png"}).message
    fails("invalid_arguments", generate, CTX, {"prompt": ""})
    assert files.list_files(CTX.ctx) == []


# -- siesta_help_resolve and connections ------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "state"),
    [
        ({"userRequest": "send an email"}, "needs_service"),
        (
            {
                "userRequest": "send with gmail",
                "targetService": "Gmail",
                "targetServiceMentionedByUser": True,
            },
            "needs_connection",
        ),
        (
            {
                "userRequest": "let the writer use slack",
                "targetServices": ["Slack"],
                "targetAgentName": "Writer",
            },
            "needs_assignment",
        ),
        (
            {
                "userRequest": "how do workflows work",
                "intent": "platform_docs",
                "topic": "workflows",
            },
            "docs",
        ),
    ],
)
def test_help_diagnoses(arguments: dict[str, Any], state: str) -> None:
    result = help_adapter()(CTX, arguments)
    assert result["state"] == state and result["title"] and result["message"]
    if state in ("needs_connection", "needs_assignment"):
        assert result["action"]["label"]


def test_help_does_not_guess_gmail_from_email() -> None:
    result = help_adapter()(CTX, {"userRequest": "email", "targetService": "Gmail"})
    assert result["state"] == "needs_service"  # named by the model, not by the user
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
