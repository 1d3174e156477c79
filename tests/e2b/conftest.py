"""A service for the stock ``e2b`` SDKs, on Docker: tokens bound to two orgs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import ServiceProcess, StartService, tokens_setting

TOKEN_A = "e2b_" + "a1" * 16
"""A token bound to ``org-e2b-a`` (the ``e2b_<hex>`` form even SDK 2.45 accepts)."""
ORG_A = "org-e2b-a"
TOKEN_B = "e2b_" + "b2" * 16
"""A token bound to ``org-e2b-b``."""
TOKEN_TOOLS = "e2b_" + "c3" * 16
"""A valid token without the ``sandbox`` scope."""


@dataclass(frozen=True)
class E2bService:
    service: ServiceProcess

    @property
    def api_url(self) -> str:
        return f"{self.service.base_url}/e2b"

    @property
    def sandbox_url(self) -> str:
        return f"{self.service.base_url}/e2b/envd"

    def options(self, api_key: str = TOKEN_A) -> dict[str, Any]:
        """What the SDKs take instead of E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY."""
        return {"api_key": api_key, "api_url": self.api_url, "sandbox_url": self.sandbox_url}

    def environment(self, api_key: str = TOKEN_A) -> dict[str, str]:
        return {
            "E2B_API_URL": self.api_url,
            "E2B_SANDBOX_URL": self.sandbox_url,
            "E2B_API_KEY": api_key,
        }


@pytest.fixture(scope="module")
def e2b(start_service: StartService, docker_client: Any) -> E2bService:
    tokens = tokens_setting(
        ("e2b-a", TOKEN_A, ["sandbox"], ORG_A),
        ("e2b-b", TOKEN_B, ["sandbox"], "org-e2b-b"),
        ("tools-only", TOKEN_TOOLS, ["tools"]),
    )
    return E2bService(start_service("docker", SIESTA_TOKENS=tokens))
