"""``GoogleSearch.Search`` (Custom Search JSON API) and the Firecrawl functions."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any
from urllib.parse import urlencode

import httpx

from siesta_contract.functions.web import CrawlArgs, MapArgs, ScrapeArgs, SearchArgs, WebSearchArgs

from runtime.core import tracing
from runtime.core.errors import CrawlTimeout, ProviderFailed, SiestaError, ToolNotConfigured
from runtime.core.upstreams import Upstreams
from runtime.functions.base import parse_arguments as parse
from runtime.tools.adapters.web import fetch_page, page_client
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.settings import ToolSettings

GOOGLE_WEB_SEARCH = "https://www.google.com/search"
PAST_DEADLINE_SECONDS = 1.0
"""How long a result page's fetch may run past the search's deadline, unread: so that
it is still running at the deadline (late, the limit named), not failed by its own
timeout a moment before it."""


def call_api(
    client: httpx.Client,
    method: str,
    url: str,
    what: str,
    timeout: float | None = None,
    **kwargs: Any,
) -> Any:
    """One request to an upstream API; its JSON answer, or ``ProviderFailed``.
    ``timeout`` (seconds) replaces the client's own when a caller has less time."""
    limit = client.timeout.read if timeout is None else timeout
    if timeout is not None:
        kwargs["timeout"] = timeout
    try:
        response = client.request(method, url, **kwargs)
    except httpx.TimeoutException as exc:
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


def google_url(args: SearchArgs) -> str:
    """The same query on google.com, for the user's "View on Google" button."""
    params = {"q": args.query, "gl": args.country}
    if args.timePeriod:
        params["tbs"] = f"qdr:{args.timePeriod}"
    return f"{GOOGLE_WEB_SEARCH}?{urlencode(params)}"


def google_search_adapter(settings: ToolSettings, upstreams: Upstreams) -> Adapter:
    """One deadline for the whole call (``search_deadline_seconds``): the search
    request, then the result pages fetched at once under what is left of it."""
    client = upstreams.client("google")
    pages = page_client(settings, upstreams)
    budget = settings.search_deadline_seconds

    def search(args: SearchArgs, key: str, deadline: float) -> list[dict[str, Any]]:
        params = {
            "key": key,
            "cx": settings.google_cx,
            "q": args.query,
            "num": args.count,
            "gl": args.country,
        }
        if args.timePeriod:
            params["dateRestrict"] = args.timePeriod
        left = max(0.0, deadline - time.monotonic())
        try:
            body = call_api(
                client,
                "GET",
                f"{settings.google_base_url}/customsearch/v1",
                "Google Custom Search",
                timeout=min(left, settings.http_timeout_seconds),
                params=params,
            )
        except ProviderFailed as exc:
            if "unit" not in exc.fields or left >= settings.http_timeout_seconds:
                raise
            msg = (
                f"Google Custom Search did not answer within the limit of {budget:g} seconds "
                "for the whole search (SIESTA_TOOLS__SEARCH_DEADLINE_SECONDS)"
            )
            raise ProviderFailed(msg, limit=budget, unit="seconds") from exc
        items = body.get("items") if isinstance(body, dict) else None
        return [
            {
                "title": item.get("title", ""),
                "url": item["link"],
                "snippet": item.get("snippet", ""),
            }
            for item in (items or [])[: args.count]
            if isinstance(item, dict) and "link" in item
        ]

    def page_text(url: str, deadline: float) -> str:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        # A page still loading at the deadline is late (the search's limit is named):
        # its own timeout ends just after the deadline, never racing it.
        timeout = min(left + PAST_DEADLINE_SECONDS, settings.http_timeout_seconds)
        return fetch_page(url, settings, pages, timeout).text

    def add_contexts(results: list[dict[str, Any]], deadline: float) -> list[str]:
        if not results:
            return []
        workers = min(len(results), settings.search_parallel_fetches)
        pool = ThreadPoolExecutor(workers, thread_name_prefix="search-page")
        try:
            fetch = tracing.carry(page_text)
            futures = [pool.submit(fetch, str(r["url"]), deadline) for r in results]
            wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # late pages finish unread
        late = 0
        for result, future in zip(results, futures, strict=True):
            result["context"], result["contextError"] = None, None  # the snippet still helps
            error = future.exception() if future.done() and not future.cancelled() else None
            if future.done() and not future.cancelled() and error is None:
                result["context"] = future.result()
            elif isinstance(error, SiestaError):
                result["contextError"] = error.message
            elif error is not None and not isinstance(error, TimeoutError):
                result["contextError"] = f"the page could not be read: {type(error).__name__}"
            else:
                late += 1
                result["contextError"] = f"not read within the search's limit of {budget:g} seconds"
        if not late:
            return []
        return [
            f"{late} of {len(results)} result pages were not read within the limit of "
            f"{budget:g} seconds for the whole search (SIESTA_TOOLS__SEARCH_DEADLINE_SECONDS); "
            "their context is null"
        ]

    def run(_: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        args = parse(SearchArgs, "GoogleSearch.Search", arguments)
        if settings.google_api_key is None or not settings.google_cx:
            msg = "GoogleSearch.Search needs SIESTA_TOOLS__GOOGLE_API_KEY and __GOOGLE_CX"
            raise ToolNotConfigured(msg)
        deadline = time.monotonic() + budget
        results = search(args, settings.google_api_key.get_secret_value(), deadline)
        notes = add_contexts(results, deadline)
        on_google = google_url(args)
        return {
            "query": args.query,
            "results": results,
            "urls": [result["url"] for result in results],
            "googleUrl": on_google,
            "button": {"label": "View on Google", "kind": "open_url", "url": on_google},
            "deadlineSeconds": budget,
            "notes": notes,
        }

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
        request: dict[str, Any] = {"url": a.url, "limit": a.limit}
        if a.search is not None:  # Firecrawl takes a string or nothing, not null
            request["search"] = a.search
        body = post("/v1/map", request, "Firecrawl map")
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
