"""A document added by URL: fetched by the service, through the egress rules.

The URL's host (and every redirect's) must be on the deployment's egress allowlist
(``SIESTA_EGRESS__ALLOW``), the list that bounds what sandboxes reach: a knowledge
base is no way around it. The connection passes the address policy the proxy applies
(``runtime/egress/outbound.py``: no private, loopback or metadata address unless the
operator opened it), and the body is read up to the document limit, not past it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from runtime.core.addresses import literal_address
from runtime.core.errors import UrlNotAllowed
from runtime.core.network_rules import Allowlist
from runtime.egress import outbound
from runtime.knowledge.errors import DocumentTooLarge


class DocumentFetcher:
    def __init__(self, client: httpx.Client, allowlist: Allowlist, timeout: float) -> None:
        self._client = client
        self._allowlist = allowlist
        self._timeout = timeout

    def fetch(self, url: str, limit: int) -> tuple[bytes, str, str]:
        """(body, content type, final URL), or the refusal that says why not."""

        def too_large(at: str) -> DocumentTooLarge:
            msg = f"{at} is over {limit} bytes (SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES)"
            return DocumentTooLarge(msg, limit=limit, unit="bytes")

        fetched = outbound.fetch(
            self._client,
            url,
            max_bytes=limit,
            timeout=self._timeout,
            check=self._check,
            too_large=too_large,
        )
        return fetched.body, fetched.content_type, fetched.url

    def _check(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            msg = f"only http and https URLs can be fetched, not {url[:200]!r}"
            raise UrlNotAllowed(msg, url=url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if not self._allowlist.allows(parts.hostname, port, literal_address(parts.hostname)):
            msg = (
                f"{parts.hostname}:{port} is not in the deployment's egress allowlist "
                f"({self._allowlist}; SIESTA_EGRESS__ALLOW)"
            )
            raise UrlNotAllowed(msg, url=url)
