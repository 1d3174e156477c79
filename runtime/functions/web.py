"""Web functions: Google Custom Search, the Firecrawl functions, web_fetch
(models: ``siesta_contract.functions.web``)."""

from __future__ import annotations

from siesta_contract.functions.web import (
    CrawlArgs,
    MapArgs,
    ScrapeArgs,
    SearchArgs,
    WebFetchArgs,
    WebSearchArgs,
)

from runtime.functions.base import FunctionSpec

GOOGLE_SEARCH = FunctionSpec(
    "GoogleSearch.Search",
    "Search Google and return titles, URLs, snippets and short page context (null for "
    "pages not read within the search's deadline), with a View on Google link.",
    SearchArgs,
)
FIRECRAWL = [
    FunctionSpec("ScrapePageAsync", "Scrape one page as markdown with its title.", ScrapeArgs),
    FunctionSpec(
        "CrawlSiteAsync", "Crawl a site and combine page markdown with source URLs.", CrawlArgs
    ),
    FunctionSpec("MapSiteAsync", "List the links of a site.", MapArgs),
    FunctionSpec(
        "SearchWebAsync", "Search the web and return markdown or descriptions.", WebSearchArgs
    ),
]
WEB_FETCH = FunctionSpec(
    "web_fetch",
    "Fetch one web page and return its URL, title, description and main text.",
    WebFetchArgs,
)
