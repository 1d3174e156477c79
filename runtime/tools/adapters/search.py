"""``GoogleSearch.Search`` (Custom Search JSON API) and the Firecrawl functions."""

from __future__ import annotations

import time
from typing import Any

import httpx

from runtime.config import ToolSettings
from runtime.errors import CrawlTimeout, FetchFailed, ProviderFailed, ToolNotConfigured
from runtime.functions.base import parse_arguments as parse
from runtime.functions.web import CrawlArgs, MapArgs, ScrapeArgs, SearchArgs, WebSearchArgs
from runtime.tools.adapters.web import fetch_page, page_client
from runtime.tools.call import Adapter, ToolCall
from runtime.upstreams import Upstreams


def call_api(client: httpx.Client, method: str, url: str, what: str, **kwargs: Any) -> Any:
    """One request to an upstream API; its JSON answer, or ``ProviderFailed``."""
    try:
        response = client.request(method, url, **kwargs)
    except httpx.TimeoutException as exc:
        limit = client.timeout.read
        msg = f"{what} did not answer within {limit:g} seconds"
        raise ProviderFailed(msg, limit=limit, unit="seconds") from exc
    except httpx.HTTPError as exc:
        msg = f"{what} could not be reached: {type(exc).__name__}"
        raise ProviderFailed(msg) from exc
    if response.status_code >= 400:
        msg = f"{what} failed with HTTP {response.status_code}: {response.text[:300]}"
        raise ProviderFailed(msg, status=response.status_code)
    try:
        return response.json()
    except ValueError as exc:
        msg = f"{what} answered with something that is not JSON"
        raise ProviderFailed(msg) from exc


def google_search_adapter(settings: ToolSettings, upstreams: Upstreams) -> Adapter:
    client = upstreams.client("google")
    pages = page_client(settings, upstreams)

    def run(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        args = parse(SearchArgs, "GoogleSearch.Search", arguments)
        if settings.google_api_key is None or not settings.google_cx:
            msg = "GoogleSearch.Search needs SIESTA_TOOLS__GOOGLE_API_KEY and __GOOGLE_CX"
            raise ToolNotConfigured(msg)
        params = {
            "key": settings.google_api_key.get_secret_value(),
            "cx": settings.google_cx,
            "q": args.query,
            "num": args.count,
            "gl": args.country,
        }
        if args.timePeriod:
            params["dateRestrict"] = args.timePeriod
        body = call_api(
            client,
            "GET",
            f"{settings.google_base_url}/customsearch/v1",
            "Google Custom Search",
            params=params,
        )
        items = body.get("items") if isinstance(body, dict) else None
        results = []
        for item in (items or [])[: args.count]:
            if not isinstance(item, dict) or "link" not in item:
                continue
            entry = {
                "title": item.get("title", ""),
                "url": item["link"],
                "snippet": item.get("snippet", ""),
            }
            try:
                entry["context"] = fetch_page(str(item["link"]), settings, pages).text
            except FetchFailed:
                entry["context"] = None  # the snippet still helps
            results.append(entry)
        return {"query": args.query, "results": results}

    return run


def firecrawl_adapters(settings: ToolSettings, upstreams: Upstreams) -> dict[str, Adapter]:
    client = upstreams.client("firecrawl")

    def post(path: str, body: dict[str, Any], what: str) -> Any:
        return call_api(
            client,
            "POST",
            f"{settings.firecrawl_base_url}{path}",
            what,
            json=body,
            headers=_auth(),
        )

    def _auth() -> dict[str, str]:
        if settings.firecrawl_api_key is None:
            msg = "Firecrawl needs SIESTA_TOOLS__FIRECRAWL_API_KEY"
            raise ToolNotConfigured(msg)
        return {"Authorization": f"Bearer {settings.firecrawl_api_key.get_secret_value()}"}

    def data(body: Any, what: str) -> Any:
        if not isinstance(body, dict) or body.get("success") is False or "data" not in body:
            msg = f"{what}: {body.get('error') if isinstance(body, dict) else 'bad answer'}"
            raise ProviderFailed(msg)
        return body["data"]

    def scrape(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        a = parse(ScrapeArgs, "ScrapePageAsync", arguments)
        page = data(
            post(
                "/v1/scrape",
                {"url": a.url, "formats": ["markdown"], "onlyMainContent": a.onlyMainContent},
                "Firecrawl scrape",
            ),
            "Firecrawl scrape",
        )
        return {
            "url": a.url,
            "title": (page.get("metadata") or {}).get("title"),
            "markdown": page.get("markdown", ""),
        }

    def crawl(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        a = parse(CrawlArgs, "CrawlSiteAsync", arguments)
        started = post(
            "/v1/crawl",
            {
                "url": a.url,
                "limit": a.limit,
                "includePaths": a.includePaths,
                "excludePaths": a.excludePaths,
            },
            "Firecrawl crawl",
        )
        job = started.get("id") if isinstance(started, dict) else None
        if not job:
            msg = "Firecrawl crawl: no job id in the answer"
            raise ProviderFailed(msg)
        deadline = time.monotonic() + settings.crawl_timeout_seconds
        while True:
            status = call_api(
                client,
                "GET",
                f"{settings.firecrawl_base_url}/v1/crawl/{job}",
                "Firecrawl crawl status",
                headers=_auth(),
            )
            state = status.get("status") if isinstance(status, dict) else None
            if state == "completed":
                pages = [
                    {
                        "url": (p.get("metadata") or {}).get("sourceURL"),
                        "markdown": p.get("markdown", ""),
                    }
                    for p in status.get("data") or []
                ]
                return {
                    "url": a.url,
                    "pages": pages,
                    "markdown": "\n\n".join(f"# {p['url']}\n{p['markdown']}" for p in pages),
                }
            if state in ("failed", "cancelled"):
                msg = f"Firecrawl crawl {job} {state}"
                raise ProviderFailed(msg)
            if time.monotonic() > deadline:
                msg = (
                    f"Firecrawl crawl {job} did not finish within the limit of "
                    f"{settings.crawl_timeout_seconds:g} seconds"
                )
                raise CrawlTimeout(msg, limit=settings.crawl_timeout_seconds, unit="seconds")
            time.sleep(settings.crawl_poll_seconds)

    def site_map(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        a = parse(MapArgs, "MapSiteAsync", arguments)
        body = post(
            "/v1/map", {"url": a.url, "search": a.search, "limit": a.limit}, "Firecrawl map"
        )
        links = body.get("links") if isinstance(body, dict) else None
        if not isinstance(links, list):
            msg = "Firecrawl map: no links in the answer"
            raise ProviderFailed(msg)
        return {"url": a.url, "links": links[: a.limit]}

    def web_search(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        a = parse(WebSearchArgs, "SearchWebAsync", arguments)
        results = data(
            post("/v1/search", {"query": a.query, "limit": a.limit}, "Firecrawl search"),
            "Firecrawl search",
        )
        return {
            "query": a.query,
            "results": [
                {
                    "url": r.get("url"),
                    "title": r.get("title"),
                    "content": r.get("markdown") or r.get("description", ""),
                }
                for r in results[: a.limit]
                if isinstance(r, dict)
            ],
        }

    return {
        "ScrapePageAsync": scrape,
        "CrawlSiteAsync": crawl,
        "MapSiteAsync": site_map,
        "SearchWebAsync": web_search,
    }
