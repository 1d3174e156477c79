"""Fetching web pages for tools: the address check, bounded reads, text extraction.

Shared by ``web_fetch`` and ``GoogleSearch.Search`` (which reads each result).
Unless the deployment allows it, pages on loopback, private, link-local or
metadata addresses are refused: every connection, redirects included, goes to an
address that was checked (``runtime/egress/outbound.py``), never to a second
resolution of the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from selectolax.lexbor import LexborHTMLParser

from siesta_contract.functions.web import WebFetchArgs

from runtime.core.errors import UrlNotAllowed
from runtime.core.upstreams import Upstreams
from runtime.egress.outbound import CheckedBackend, checked_transport, fetch
from runtime.functions.base import parse_arguments as parse
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.settings import ToolSettings

REMOVED_TAGS = "script,style,nav,header,footer,iframe,svg,noscript"
TEXT_TAGS = "p,h1,h2,h3,h4,h5,h6,li"
TITLE_CHARS, DESCRIPTION_CHARS = 200, 300


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    description: str
    text: str


def fetch_page(
    url: str, settings: ToolSettings, client: httpx.Client, timeout: float | None = None
) -> Page:
    """One page's title, description and text; ``timeout`` (seconds) bounds each
    connect and read, below the client's own when a caller has less time left."""
    html, final_url = _get(url, settings, client, timeout)
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    meta = tree.css_first('meta[name="description"]') or tree.css_first(
        'meta[property="og:description"]'
    )
    for node in tree.css(REMOVED_TAGS):
        node.decompose()
    parts = [node.text(strip=True, separator=" ") for node in tree.css(TEXT_TAGS)]
    text = "\n".join(part for part in parts if part)
    return Page(
        url=final_url,
        title=(title_node.text(strip=True) if title_node else "")[:TITLE_CHARS],
        description=str((meta.attributes.get("content") if meta else "") or "")[:DESCRIPTION_CHARS],
        text=text[: settings.context_chars],
    )


def _get(
    url: str, settings: ToolSettings, client: httpx.Client, timeout: float | None
) -> tuple[str, str]:
    fetched = fetch(
        client, url, max_bytes=settings.fetch_max_bytes, timeout=timeout, check=_check_url
    )
    return fetched.body.decode(fetched.encoding or "utf-8", errors="replace"), fetched.url


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        msg = f"only http and https URLs can be fetched, not {url[:200]!r}"
        raise UrlNotAllowed(msg, url=url)


def page_client(settings: ToolSettings, upstreams: Upstreams) -> httpx.Client:
    """The client for pages a model names: every connection passes the address check."""
    allow_private = settings.allow_private_networks
    backend = CheckedBackend(allow_private=allow_private)
    name = "pages-any-address" if allow_private else "pages"
    return upstreams.client(name, transport=checked_transport(backend), propagate=False)


def web_fetch_adapter(settings: ToolSettings, upstreams: Upstreams) -> Adapter:
    """``web_fetch(url)``: URL, Title (≤200), Description (≤300), Content — one text block."""
    client = page_client(settings, upstreams)

    def run(_: ToolCall, arguments: dict[str, Any]) -> str:
        page = fetch_page(parse(WebFetchArgs, "web_fetch", arguments).url, settings, client)
        lines = [f"URL: {page.url}"]
        if page.title:
            lines.append(f"Title: {page.title}")
        if page.description:
            lines.append(f"Description: {page.description}")
        lines.append(f"Content:\n{page.text}")
        return "\n".join(lines)

    return run
