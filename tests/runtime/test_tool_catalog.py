"""Every gating rule of the catalog, positive and negative, as a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from siesta_contract.agents import AgentConfig, SystemToolId, UserInfo

from runtime.images.catalog import CatalogImage, ImageCatalog
from runtime.tools.catalog import build_catalog
from runtime.tools.settings import ToolSettings

IMAGES = ImageCatalog(
    [
        CatalogImage(id="debian-base", title="Debian", image="x"),
        CatalogImage(id="old", title="Old", image="y", enabled=False),
    ],
    Path("."),
)
SANDBOX = {"runCommand", "writeFile", "readFile", "listFiles", "publishFiles"}
FIRECRAWL = {"ScrapePageAsync", "CrawlSiteAsync", "MapSiteAsync", "SearchWebAsync"}
GOOGLE = "system-google-search"
FIRE = "system-firecrawl"


def names(agent: dict[str, Any], role: str = "User", sandbox_enabled: bool = True) -> set[str]:
    config = AgentConfig.model_validate({"id": "a1", **agent})
    catalog = build_catalog(
        config,
        UserInfo.model_validate({"id": "u1", "role": role}),
        ToolSettings(),
        IMAGES,
        sandbox_enabled=sandbox_enabled,
    )
    return {f.name for f in catalog.functions}


def platform(found: set[str]) -> set[str]:
    return {n for n in found if n.startswith("Platform_") and n != "Platform_CreateTask"}


@pytest.mark.parametrize(
    ("role", "assigned", "expected"),
    [
        ("Owner", True, True),
        ("Admin", True, True),
        ("User", True, False),
        ("Owner", False, False),
        ("Admin", False, False),
        ("User", False, False),
    ],
)
def test_platform_tools_need_assignment_and_owner_or_admin(
    role: str, assigned: bool, expected: bool
) -> None:
    found = names({"systemToolIds": ["platform_tools"] if assigned else []}, role=role)
    assert bool(platform(found)) is expected
    if expected:
        assert len(platform(found)) == 20


@pytest.mark.parametrize(
    ("assigned", "model", "expected"),
    [
        (True, {"provider": "openai", "name": "gpt-4.1"}, True),
        (True, {"provider": "OpenAI", "name": "gpt-5"}, True),
        (True, {"provider": "openai", "name": "o3"}, False),
        (True, {"provider": "anthropic", "name": "gpt-4.1"}, False),
        (True, {"provider": "byo", "name": "gpt-4.1"}, False),
        (True, None, False),
        (False, {"provider": "openai", "name": "gpt-4.1"}, False),
    ],
)
def test_image_generation_needs_assignment_and_an_openai_gpt_model(
    assigned: bool, model: dict[str, str] | None, expected: bool
) -> None:
    agent = {"systemToolIds": ["image_generation"] if assigned else [], "model": model}
    assert ("image_generation" in names(agent)) is expected


@pytest.mark.parametrize(
    ("enabled", "assigned", "image", "expected"),
    [
        (True, True, "debian-base", True),
        (False, True, "debian-base", False),
        (True, False, "debian-base", False),
        (True, True, None, False),
        (True, True, "old", False),
        (True, True, "unknown", False),
    ],
)
def test_sandbox_needs_deployment_assignment_and_a_catalog_image(
    enabled: bool, assigned: bool, image: str | None, expected: bool
) -> None:
    agent = {"systemToolIds": ["sandbox"] if assigned else [], "baseImage": image}
    found = names(agent, sandbox_enabled=enabled)
    assert (found >= SANDBOX) is expected
    assert not (SANDBOX & found) or expected  # all five or none


@pytest.mark.parametrize(("workspace", "expected"), [("tw-1", True), (None, False), ("", False)])
def test_create_task_needs_a_task_workspace(workspace: str | None, expected: bool) -> None:
    agent = {"systemToolIds": ["task_management"], "taskWorkspaceId": workspace}
    assert ("Platform_CreateTask" in names(agent)) is expected
    assert "Platform_CreateTask" not in names({"taskWorkspaceId": "tw-1"})


@pytest.mark.parametrize(
    ("tool", "connection", "functions", "expected"),
    [
        ("google_search", GOOGLE, {"GoogleSearch.Search"}, True),
        ("google_search", "someone-elses", {"GoogleSearch.Search"}, False),
        ("google_search", None, {"GoogleSearch.Search"}, False),
        ("web_scraper", FIRE, FIRECRAWL, True),
        ("web_scraper", GOOGLE, FIRECRAWL, False),
    ],
)
def test_connection_backed_system_tools_need_the_system_connection(
    tool: str, connection: str | None, functions: set[str], expected: bool
) -> None:
    agent = {
        "systemToolIds": [tool],
        "systemConnectionIds": {tool: connection} if connection else {},
    }
    assert (functions <= names(agent)) is expected


def test_web_fetch_comes_with_the_web_scraper_without_a_provider_connection() -> None:
    assert names({"systemToolIds": ["web_scraper"]}) == {"web_fetch"}


def test_orchestration_js_and_help_when_assigned_with_a_warning_without_sub_agents() -> None:
    config = AgentConfig.model_validate(
        {"id": "a1", "systemToolIds": ["orchestration", "js_executor", "siesta_help"]}
    )
    catalog = build_catalog(
        config, UserInfo(id="u", role="User"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    assert {f.name for f in catalog.functions} == {
        "run_function_batch",
        "JsExecutorAgent",
        "siesta_help_resolve",
    }
    assert any("no sub-agents" in note for note in catalog.notes)
    assert names({}) == set()
    with_sub_agents = AgentConfig.model_validate(
        {"id": "a1", "systemToolIds": ["orchestration"], "subAgents": ["researcher"]}
    )
    quiet = build_catalog(
        with_sub_agents, UserInfo(id="u", role="User"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    assert not any("sub-agents" in note for note in quiet.notes)


def test_connection_policies_and_groups() -> None:
    config = AgentConfig.model_validate(
        {
            "id": "a1",
            "connections": [
                {
                    "id": "c1",
                    "kind": "shared",
                    "functions": [
                        {"name": "Gmail.Send", "policy": "confirm"},
                        {"name": "Gmail.Delete", "policy": "disabled"},
                        {"name": "Gmail.Read", "policy": "enabled"},
                    ],
                },
                {
                    "id": "c2",
                    "kind": "private",
                    "functions": [{"name": "Drive.Read", "policy": "enabled"}],
                },
            ],
        }
    )
    catalog = build_catalog(
        config, UserInfo(id="u", role="User"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    by_name = {f.name: f for f in catalog.functions}
    assert set(by_name) == {"Gmail.Send", "Gmail.Read", "Drive.Read"}
    assert (by_name["Gmail.Send"].policy, by_name["Gmail.Send"].group) == ("confirm", "Shared")
    assert (by_name["Drive.Read"].group, by_name["Drive.Read"].source) == (
        "Private",
        "connection:c2",
    )


def test_name_collisions_system_first_then_shared_then_private() -> None:
    config = AgentConfig.model_validate(
        {
            "id": "a1",
            "systemToolIds": ["js_executor"],
            "connections": [
                {
                    "id": "private-1",
                    "kind": "private",
                    "functions": [
                        {"name": "JsExecutorAgent", "policy": "enabled"},
                        {"name": "Crm.Find", "policy": "enabled"},
                    ],
                },
                {
                    "id": "shared-1",
                    "kind": "shared",
                    "functions": [{"name": "Crm.Find", "policy": "confirm"}],
                },
            ],
        }
    )
    catalog = build_catalog(
        config, UserInfo(id="u", role="User"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    by_name = {f.name: f for f in catalog.functions}
    assert by_name["JsExecutorAgent"].source == "system:js_executor"
    assert by_name["Crm.Find"].source == "connection:shared-1"
    assert len(catalog.notes) == 2
    assert all("was dropped" in note for note in catalog.notes)


def test_system_functions_can_require_confirmation_or_be_disabled() -> None:
    config = AgentConfig.model_validate(
        {
            "id": "a1",
            "systemToolIds": ["sandbox"],
            "baseImage": "debian-base",
            "functionPolicies": {"runCommand": "confirm", "publishFiles": "disabled"},
        }
    )
    catalog = build_catalog(
        config, UserInfo(id="u", role="User"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    by_name = {f.name: f for f in catalog.functions}
    assert by_name["runCommand"].policy == "confirm"
    assert "publishFiles" not in by_name and by_name["readFile"].policy == "enabled"


ORG_POLICIES = ToolSettings.model_validate(
    {
        "org_policies": {
            "acme": {
                "functionPolicies": {"JsExecutorAgent": "disabled", "runCommand": "confirm"},
                "trustedAgents": {"JsExecutorAgent": ["agent-ops"]},
            }
        }
    }
)


@pytest.mark.parametrize(
    ("org", "agent", "js", "run"),
    [
        ("acme", "agent-1", None, ("confirm", "the organization's policy")),
        ("acme", "agent-ops", "enabled", ("confirm", "the organization's policy")),
        ("other", "agent-1", "enabled", ("enabled", "default")),
        (None, "agent-1", "enabled", ("enabled", "default")),
    ],
)
def test_an_organizations_policies_hold_for_its_agents_except_those_it_trusts(
    org: str | None, agent: str, js: str | None, run: tuple[str, str]
) -> None:
    config = AgentConfig.model_validate(
        {"id": agent, "systemToolIds": ["sandbox", "js_executor"], "baseImage": "debian-base"}
    )
    user = UserInfo(id="u", role="User")
    floor = ORG_POLICIES.org_floor(org, agent)  # agent-ops as registered in acme
    catalog = build_catalog(
        config, user, ORG_POLICIES, IMAGES, sandbox_enabled=True, org_floor=floor
    )
    by_name = {f.name: f for f in catalog.functions}
    assert (by_name["JsExecutorAgent"].policy if "JsExecutorAgent" in by_name else None) == js
    assert (by_name["runCommand"].policy, by_name["runCommand"].policy_reason) == run


def test_definitions_are_openai_function_schemas() -> None:
    everything = AgentConfig.model_validate(
        {
            "id": "a1",
            "baseImage": "debian-base",
            "taskWorkspaceId": "t",
            "model": {"provider": "openai", "name": "gpt-4.1"},
            "subAgents": ["r"],
            "systemConnectionIds": {"google_search": GOOGLE, "web_scraper": FIRE},
            "systemToolIds": list(get_args(SystemToolId)),
        }
    )
    catalog = build_catalog(
        everything, UserInfo(id="u", role="Owner"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    assert len(catalog.functions) == 1 + 1 + 4 + 1 + 1 + 5 + 1 + 20 + 1 + 1 + 5 + 6 + 2
    for function in catalog.functions:
        schema = function.parameters
        assert schema["type"] == "object"
        assert set(schema["required"]) <= set(schema["properties"])
        assert function.description


@pytest.mark.parametrize(
    ("shared_with", "audience", "kept", "missing"),
    [
        (["team-a", "team-b"], ["team-a"], True, None),
        (["team-a", "team-b"], ["team-b", "team-a"], True, None),
        (["team-a"], ["team-a", "team-b"], False, "team-b"),
        ([], ["org-1"], False, "org-1"),
        ([], [], True, None),
        (None, ["team-a"], True, None),  # the request does not say whom it is shared with
        (["team-a"], None, True, None),  # ... or whom the agent serves
    ],
)
def test_a_shared_connection_must_be_shared_with_the_agents_audience(
    shared_with: list[str] | None, audience: list[str] | None, kept: bool, missing: str | None
) -> None:
    config = AgentConfig.model_validate(
        {
            "id": "a1",
            "audience": audience,
            "connections": [
                {
                    "id": "team-crm",
                    "kind": "shared",
                    "sharedWith": shared_with,
                    "functions": [{"name": "Crm.Find"}, {"name": "Crm.Get"}],
                },
                {"id": "mine", "kind": "private", "functions": [{"name": "Drive.ListFiles"}]},
            ],
        }
    )
    catalog = build_catalog(
        config, UserInfo(id="u", role="User"), ToolSettings(), IMAGES, sandbox_enabled=True
    )
    found = {f.name for f in catalog.functions}
    assert "Drive.ListFiles" in found  # a private connection is the user's own
    assert ({"Crm.Find", "Crm.Get"} <= found) is kept
    assert not ({"Crm.Find", "Crm.Get"} & found) or kept
    if missing:
        (note,) = catalog.notes
        assert "team-crm" in note and "not shared with all of the agent's audience" in note
        assert f"missing: {missing}" in note
    else:
        assert catalog.notes == []


def test_a_private_connection_is_never_held_to_an_audience() -> None:
    config = AgentConfig.model_validate(
        {
            "id": "a1",
            "audience": ["team-a", "team-b"],
            "connections": [
                {
                    "id": "c",
                    "kind": "private",
                    "sharedWith": ["nobody"],
                    "functions": [{"name": "Drive.ListFiles", "policy": "enabled"}],
                }
            ],
        }
    )
    user = UserInfo(id="u", role="User")
    catalog = build_catalog(config, user, ToolSettings(), IMAGES, sandbox_enabled=True)
    assert [f.name for f in catalog.functions] == ["Drive.ListFiles"]
    assert catalog.notes == []


def test_the_catalog_shows_each_effective_policy_and_why() -> None:
    config = AgentConfig.model_validate(
        {
            "id": "a1",
            "systemToolIds": ["platform_tools", "task_management", "sandbox", "image_generation"],
            "taskWorkspaceId": "tw-1",
            "baseImage": "debian-base",
            "model": {"provider": "openai", "name": "gpt-4.1"},
            "functionPolicies": {"runCommand": "enabled", "Platform_UpdateSkill": "enabled"},
            "connections": [
                {
                    "id": "c1",
                    "kind": "shared",
                    "functions": [
                        {"name": "Gmail.SendEmail"},
                        {"name": "Gmail.ReadEmail"},
                        {"name": "Slack.PostMessage", "policy": "enabled"},
                        {"name": "Stripe.Refund", "policy": "disabled"},
                    ],
                }
            ],
        }
    )
    settings = ToolSettings(function_policies={"runCommand": "confirm", "Drive.Sync": "disabled"})
    catalog = build_catalog(
        config, UserInfo(id="u", role="Owner"), settings, IMAGES, sandbox_enabled=True
    )
    shown = {f.name: (f.public()["policy"], f.public()["policyReason"]) for f in catalog.functions}
    expected = {
        "Platform_CreateTask": ("confirm", "default: create actions need confirmation"),
        "Platform_CreateAgent": ("confirm", "default: create actions need confirmation"),
        "Platform_UpdateAgent": ("confirm", "default: update actions need confirmation"),
        "Platform_UpdateSkill": ("enabled", "the agent's configuration"),
        "Platform_GetAgent": ("enabled", "default"),
        "Platform_ListMessages": ("enabled", "default"),
        "publishFiles": ("confirm", "default: publishFiles publishes or creates for the user"),
        "image_generation": (
            "confirm",
            "default: image_generation publishes or creates for the user",
        ),
        "readFile": ("enabled", "default"),
        "runCommand": ("confirm", "the deployment's policy (the agent asked for enabled)"),
        "Gmail.SendEmail": ("confirm", "default: send actions need confirmation"),
        "Gmail.ReadEmail": ("enabled", "default: its name says it reads"),
        "Slack.PostMessage": ("enabled", "the agent's configuration"),
    }
    assert {name: shown[name] for name in expected} == expected
    assert "Stripe.Refund" not in shown
