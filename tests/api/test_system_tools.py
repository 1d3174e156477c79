"""Discovery for the agent-configuration form: which System Tools this deployment
offers, why one is unavailable, who may assign it; and ``GET /v1/images`` saying
when Sandbox is disabled (the reference: "Sandbox is not listed, or Base image has
no choices: the environment does not expose Sandbox or has no enabled image catalog")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

from siesta_contract.agents import SystemToolId

from tests.helpers import headers
from tests.inprocess import in_process_service

ALL_TOOLS = list(get_args(SystemToolId))
CONFIGURED = {
    "SIESTA_TOOLS__PLATFORM_BASE_URL": "http://platform.invalid",
    "SIESTA_TOOLS__GOOGLE_API_KEY": "k",
    "SIESTA_TOOLS__GOOGLE_CX": "cx",
    "SIESTA_TOOLS__FIRECRAWL_API_KEY": "k",
    "SIESTA_TOOLS__OPENAI_API_KEY": "k",
    "SIESTA_AGENTS__GATEWAY__TYPE": "http",
    "SIESTA_AGENTS__GATEWAY__BACKEND_URL": "http://agents.invalid",
}


def disabled_catalog(tmp_path: Path) -> dict[str, str]:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "images:\n  - {id: old, title: Old, description: retired, image: siesta/old:1, "
        "enabled: false}\n"
    )
    return {"SIESTA_IMAGES__CATALOG_PATH": str(catalog)}


@pytest.fixture
def discover(tmp_path: Path) -> Iterator[Any]:
    def get(env: dict[str, str], path: str = "/v1/tools/system") -> Any:
        with in_process_service(tmp_path / "data", {"SIESTA_PROVIDER__TYPE": "fake", **env}) as s:
            response = s.client.get(path, headers=headers())
            assert response.status_code == 200, response.text
            return response.json()

    yield get


def by_id(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["id"]: tool for tool in body["systemTools"]}


# (settings, tool, available, words the reason must contain)
AVAILABILITY = [
    ({}, "sandbox", True, None),
    ({}, "js_executor", True, None),
    ({}, "siesta_help", True, None),
    ({}, "google_search", False, "SIESTA_TOOLS__GOOGLE_API_KEY"),
    ({}, "web_scraper", False, "SIESTA_TOOLS__FIRECRAWL_API_KEY"),
    ({}, "image_generation", False, "SIESTA_TOOLS__OPENAI_API_KEY"),
    ({}, "platform_tools", False, "SIESTA_TOOLS__PLATFORM_BASE_URL"),
    ({}, "task_management", False, "SIESTA_TOOLS__PLATFORM_BASE_URL"),
    ({}, "orchestration", False, "SIESTA_AGENTS__GATEWAY__TYPE"),
    (CONFIGURED, "google_search", True, None),
    (CONFIGURED, "web_scraper", True, None),
    (CONFIGURED, "image_generation", True, None),
    (CONFIGURED, "platform_tools", True, None),
    (CONFIGURED, "task_management", True, None),
    (CONFIGURED, "orchestration", True, None),
    ({"SIESTA_SANDBOX__ENABLED": "false"}, "sandbox", False, "SIESTA_SANDBOX__ENABLED"),
    ({"SIESTA_TOOLS__GOOGLE_CX": "cx"}, "google_search", False, "GOOGLE_API_KEY"),
]


@pytest.mark.parametrize(("env", "tool", "available", "reason"), AVAILABILITY)
def test_availability_and_its_reason(
    discover: Any, env: dict[str, str], tool: str, available: bool, reason: str | None
) -> None:
    entry = by_id(discover(env))[tool]
    assert entry["available"] is available
    if reason is None:
        assert entry["reason"] is None
    else:
        assert reason in entry["reason"]


def test_every_tool_is_listed_with_what_an_agent_needs(discover: Any) -> None:
    tools = discover({})["systemTools"]
    assert [tool["id"] for tool in tools] == ALL_TOOLS
    entries = {tool["id"]: tool for tool in tools}
    assert entries["sandbox"]["functions"] == [
        "runCommand",
        "readFile",
        "writeFile",
        "listFiles",
        "publishFiles",
    ]
    assert "base image" in entries["sandbox"]["requires"]


@pytest.mark.parametrize(
    ("tool", "roles"),
    [
        ("platform_tools", ["Owner", "Admin"]),  # hidden from normal Users
        ("sandbox", ["Owner", "Admin", "User"]),
        ("js_executor", ["Owner", "Admin", "User"]),
    ],
)
def test_who_may_assign_each_tool(discover: Any, tool: str, roles: list[str]) -> None:
    assert by_id(discover({}))[tool]["assignableBy"] == roles


def test_a_catalog_without_enabled_images_makes_sandbox_unavailable(
    discover: Any, tmp_path: Path
) -> None:
    env = disabled_catalog(tmp_path)
    sandbox = by_id(discover(env))["sandbox"]
    assert sandbox["available"] is False and "no enabled base image" in sandbox["reason"]
    images = discover(env, "/v1/images")
    assert images["sandboxEnabled"] is True and images["images"] == []
    assert "no enabled image" in images["reason"]


def test_images_say_when_sandbox_is_disabled(discover: Any) -> None:
    images = discover({"SIESTA_SANDBOX__ENABLED": "false"}, "/v1/images")
    assert images == {
        "sandboxEnabled": False,
        "reason": "Sandbox is not enabled in this deployment (SIESTA_SANDBOX__ENABLED)",
        "images": [],
    }
    enabled = discover({}, "/v1/images")
    assert enabled["sandboxEnabled"] is True and enabled["reason"] is None
    assert [image["id"] for image in enabled["images"]] == ["debian-base", "python", "base"]
