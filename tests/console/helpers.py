"""What the console's tests share: the tokens they sign in with (``SIESTA_TOKENS``
beside the API token), and signing in over HTTP."""

from __future__ import annotations

import re
import uuid

from fastapi.testclient import TestClient

from tests.helpers import tokens_setting
from tests.inprocess import InProcessService

ADMIN = "console-admin"
ADMIN_TOKEN = "console-admin-" + uuid.uuid4().hex
TOOLS_TOKEN = "console-tools-" + uuid.uuid4().hex
"""A token with every scope but ``admin``."""
CONSOLE_TOKENS = tokens_setting(
    (ADMIN, ADMIN_TOKEN, ["admin"]),
    ("console-tools", TOOLS_TOKEN, ["sandbox", "tools", "approve"]),
)


def browser(service: InProcessService, base_url: str = "http://testserver") -> TestClient:
    """A client of its own (its own cookies), like another browser."""
    return TestClient(service.client.app, base_url=base_url)


def sign_in(client: TestClient, token: str = ADMIN_TOKEN) -> str:
    """Signs in; the session's CSRF token (read from a page's form)."""
    response = client.post("/console/sign-in", data={"token": token})
    assert response.status_code == 200 and response.url.path == "/console", response.text
    return csrf_of(response.text)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)
