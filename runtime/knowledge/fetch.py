"""A document added by URL: fetched by the service, through the egress rules.

The URL's host (and every redirect's) must be on the deployment's egress allowlist
(``SIESTA_EGRESS__ALLOW``), the list that bounds what sandboxes reach: a knowledge
base is no way around it. The connection passes the address policy the proxy applies
(``runtime/egress/outbound.py``: no private, loopback or metadata address unless the
operator opened it), and the body is read up to the document limit, not past it.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

import httpx

from runtime.core.addresses import literal_address
from runtime.core.errors import FetchFailed, UrlNotAllowed
from runtime.core.network_rules import Allowlist
from runtime.egress.outbound import AddressRefused
from runtime.knowledge.errors import DocumentTooLarge

MAX_REDIRECTS = 5


class DocumentFetcher:
    def __init__(self, client: httpx.Client, allowlist: Allowlist, timeout: float) -> None:
        self._client = client
        self._allowlist = allowlist
        self._timeout = timeout

    def fetch(self, url: str, limit: int) -> tuple[bytes, str, str]:
        """(body, content type, final URL), or the refusal that says why not."""
        for _ in range(MAX_REDIRECTS + 1):
            self._check(url)
            try:
                with self._client.stream("GET", url, timeout=self._timeout) as answer:
                    if answer.is_redirect and "location" in answer.headers:
                        url = urljoin(url, answer.headers["location"])
                        continue
                    if answer.status_code >= 400:
                        msg = f"{url} answered HTTP {answer.status_code}"
                        raise FetchFailed(msg, url=url, status=answer.status_code)
                    body = bytearray()
                    for chunk in answer.iter_bytes():
                        body += chunk
                        if len(body) > limit:
                            msg = (
                                f"{url} is over {limit} bytes "
                                "(SIESTA_KNOWLEDGE__MAX_DOCUMENT_BYTES)"
                            )
                            raise DocumentTooLarge(msg, limit=limit, unit="bytes")
                    content_type = answer.headers.get("content-type", "")
                    return bytes(body), content_type.split(";")[0].strip(), url
            except AddressRefused as exc:
                raise UrlNotAllowed(str(exc), url=url) from exc
            except httpx.HTTPError as exc:
                msg = f"{url} could not be fetched: {type(exc).__name__}"
                raise FetchFailed(msg, url=url) from exc
        msg = f"{url}: more than {MAX_REDIRECTS} redirects"
        raise FetchFailed(msg, url=url)

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
