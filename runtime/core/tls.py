"""One TLS client context for every HTTP client the service makes.

Loading the CA bundle costs ~70 ms of CPU; httpx does it again for every client
and transport unless it is given a context. The service makes a dozen upstream
clients when it starts (the tool adapters), which cost most of a second of
start-up. An ``ssl.SSLContext`` may be shared by clients and threads.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_context() -> ssl.SSLContext:
    """The default verifying context (httpx's CA bundle), made on first use."""
    return httpx.create_ssl_context()
