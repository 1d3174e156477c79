"""Platform_* functions against a real local platform API: one definition for the
catalog's schema and the validation, the current agent for an omitted id, only
the given fields forwarded, and Platform_CreateTask's result built here."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from siesta_contract.agents import AgentConfig, UserInfo

from runtime.core.errors import SiestaError
from runtime.core.upstreams import Upstreams
from runtime.functions import FUNCTIONS
from runtime.functions.platform import CREATE_TASK, PLATFORM
from runtime.images.catalog import ImageCatalog
from runtime.tools.adapters.platform import platform_adapters
from runtime.tools.call import ToolCall
from runtime.tools.catalog import build_catalog
from runtime.tools.settings import ToolSettings
from tests.fake_apis import FakeApis
from tests.helpers import tool_call

UPSTREAMS = Upstreams(timeout_seconds=1.5)
CALL = tool_call("Platform_GetAgent", source="system:platform_tools")
TASK_CALL = tool_call(
    "Platform_CreateTask", source="system:task_management", agent={"taskWorkspaceId": "tw-1"}
)
APP = "https://app.example.com/"
ID = "11111111-1111-1111-1111-111111111111"

REQUIRED: dict[str, dict[str, Any]] = {
    "Platform_CreateTask": {"summary": "s"},
    "Platform_CreateAgent": {"name": "N"},
    "Platform_CreateAgentFromTemplate": {"templateId": "tpl-1"},
    "Platform_GetAgent": {},
    "Platform_ListAgents": {},
    "Platform_UpdateAgent": {},
    "Platform_ListConversations": {},
    "Platform_ListMessages": {"conversationId": "c-1"},
    "Platform_CreateSkill": {"name": "N", "instructions": "Do it"},
    "Platform_GetSkill": {"id": "sk-1"},
    "Platform_ListSkills": {},
    "Platform_UpdateSkill": {"id": "sk-1"},
    "Platform_GetTemplate": {"id": "tpl-1"},
    "Platform_ListTemplates": {},
    "Platform_CreateMemoryCollection": {"name": "N"},
    "Platform_GetMemoryCollection": {"id": "mc-1"},
    "Platform_ListMemoryCollections": {},
    "Platform_UpdateMemoryCollection": {"id": "mc-1", "name": "N"},
    "Platform_CreateMemoryPage": {"collectionId": "mc-1", "name": "N"},
    "Platform_GetMemoryPage": {"id": "mp-1"},
    "Platform_UpdateMemoryPage": {"id": "mp-1"},
}
"""Every Platform function and the smallest valid arguments: exactly its required
fields (the reference's "Required: Yes" and the fields a call cannot do without)."""
MISSING_ONE = [(name, field) for name, minimal in REQUIRED.items() for field in minimal]


@pytest.fixture(scope="module")
def apis() -> Iterator[FakeApis]:
    server = FakeApis()
    yield server
    server.stop()


def settings(apis: FakeApis, **overrides: Any) -> ToolSettings:
    return ToolSettings.model_validate(
        {"http_timeout_seconds": 1.5, "platform_base_url": apis.url, **overrides}
    )


def adapter(apis: FakeApis, name: str, **overrides: Any) -> Any:
    return platform_adapters(settings(apis, **overrides), UPSTREAMS)[name]


def fails(code: str, action: Any, *args: Any) -> SiestaError:
    with pytest.raises(SiestaError) as caught:
        action(*args)
    assert caught.value.code == code, caught.value.to_dict()
    return caught.value


def sent(apis: FakeApis, name: str) -> dict[str, Any]:
    """The body of the last request for ``name`` that reached the platform."""
    body: dict[str, Any] = [r for r in apis.requests if r["path"] == f"/functions/{name}"][-1][
        "body"
    ]
    return body


def call_of(name: str) -> ToolCall:
    return TASK_CALL if name == "Platform_CreateTask" else CALL


# -- one definition -------------------------------------------------------------------------


def test_the_table_covers_every_platform_function() -> None:
    assert set(REQUIRED) == {spec.name for spec in [CREATE_TASK, *PLATFORM]}


def test_the_catalog_publishes_the_required_fields_the_adapters_enforce() -> None:
    agent = AgentConfig.model_validate(
        {"id": "a1", "systemToolIds": ["platform_tools", "task_management"], "taskWorkspaceId": "t"}
    )
    catalog = build_catalog(
        agent,
        UserInfo(id="u", role="Owner"),
        ToolSettings(),
        ImageCatalog([], Path(".")),
        sandbox_enabled=False,
    )
    published = {f.name: f.parameters for f in catalog.functions}
    assert set(published) == set(REQUIRED)
    for name, minimal in REQUIRED.items():
        assert set(published[name]["required"]) == set(minimal), name
        assert published[name]["additionalProperties"] is False, name


@pytest.mark.parametrize(("name", "field"), MISSING_ONE)
def test_a_missing_or_blank_required_field_is_invalid(
    apis: FakeApis, name: str, field: str
) -> None:
    before = len(apis.requests)
    without = {k: v for k, v in REQUIRED[name].items() if k != field}
    error = fails("invalid_arguments", adapter(apis, name), call_of(name), without)
    assert f"{field}: Field required" in error.message
    blank = {**REQUIRED[name], field: "  "}
    error = fails("invalid_arguments", adapter(apis, name), call_of(name), blank)
    assert f"{field}: Value error, must not be empty" in error.message
    assert len(apis.requests) == before  # nothing reached the platform


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_the_required_fields_are_enough_and_nothing_else_is_accepted(
    apis: FakeApis, name: str
) -> None:
    assert adapter(apis, name)(call_of(name), dict(REQUIRED[name])) is not None
    unknown = {**REQUIRED[name], "bogus": 1}
    error = fails("invalid_arguments", adapter(apis, name), call_of(name), unknown)
    assert "bogus: Extra inputs are not permitted" in error.message


CONTEXT = {"org": "org", "user": "user", "agentId": "agent-1", "conversationId": "conv"}
SENT: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("Platform_CreateAgent", {"name": "N", "temperature": 0.2}, {"name": "N", "temperature": 0.2}),
    ("Platform_CreateAgentFromTemplate", {"templateId": "tpl-1"}, {"templateId": "tpl-1"}),
    ("Platform_GetAgent", {}, {"id": "agent-1"}),
    ("Platform_GetAgent", {"id": "agent-9"}, {"id": "agent-9"}),
    ("Platform_ListAgents", {"search": "ops", "limit": 5}, {"search": "ops", "limit": 5}),
    (
        "Platform_UpdateAgent",
        {"name": "N", "skillIds": ["s1"], "description": None},
        {"id": "agent-1", "name": "N", "skillIds": ["s1"], "replaceLists": ["skillIds"]},
    ),
    ("Platform_ListConversations", {"agentId": "a-2"}, {"agentId": "a-2"}),
    (
        "Platform_ListMessages",
        {"conversationId": "c-1", "role": "user"},
        {"conversationId": "c-1", "role": "user"},
    ),
    (
        "Platform_CreateSkill",
        {"name": "N", "instructions": "Do it"},
        {"name": "N", "instructions": "Do it"},
    ),
    ("Platform_GetSkill", {"id": "sk-1"}, {"id": "sk-1"}),
    ("Platform_ListSkills", {}, {}),
    (
        "Platform_UpdateSkill",
        {"id": "sk-1", "description": "d"},
        {"id": "sk-1", "description": "d"},
    ),
    ("Platform_GetTemplate", {"id": "tpl-1"}, {"id": "tpl-1"}),
    ("Platform_ListTemplates", {"search": "sales"}, {"search": "sales"}),
    ("Platform_CreateMemoryCollection", {"name": "N"}, {"name": "N"}),
    ("Platform_GetMemoryCollection", {"id": "mc-1"}, {"id": "mc-1"}),
    ("Platform_ListMemoryCollections", {}, {}),
    ("Platform_UpdateMemoryCollection", {"id": "mc-1", "name": "N"}, {"id": "mc-1", "name": "N"}),
    (
        "Platform_CreateMemoryPage",
        {"collectionId": "mc-1", "name": "N", "body": "text"},
        {"collectionId": "mc-1", "name": "N", "body": "text"},
    ),
    ("Platform_GetMemoryPage", {"id": "mp-1"}, {"id": "mp-1"}),
    ("Platform_UpdateMemoryPage", {"id": "mp-1", "order": 2}, {"id": "mp-1", "order": 2}),
]
"""What each Platform function's call sends the platform: exactly the given fields (an
omitted or null one is not sent, so the platform keeps its own default), the current
agent for an omitted id, ``replaceLists`` naming the lists an update replaces."""


def test_the_sent_table_covers_every_platform_function_but_create_task() -> None:
    assert {name for name, _, _ in SENT} == set(REQUIRED) - {"Platform_CreateTask"}


@pytest.mark.parametrize(("name", "arguments", "expected"), SENT, ids=[c[0] for c in SENT])
def test_each_platform_call_sends_exactly_this_and_answers_the_platforms_result(
    apis: FakeApis, name: str, arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    run = adapter(apis, name, platform_token="tok-1")
    answer = run(call_of(name), arguments)
    request = apis.requests[-1]
    assert (request["method"], request["path"]) == ("POST", f"/functions/{name}")
    assert request["headers"]["Authorization"] == "Bearer tok-1"
    assert request["body"] == {"arguments": expected, "context": CONTEXT}
    if name != "Platform_ListAgents":  # the fake lists only agents it knows by name
        assert answer == {"function": name, **expected}  # the platform's "result", unwrapped


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_no_function_takes_arguments_it_does_not_publish(name: str) -> None:
    spec = FUNCTIONS[name]
    assert spec.arguments.model_config.get("extra") == "forbid"
    assert spec.parameters().get("additionalProperties") is False


# -- Platform_GetAgent and Platform_UpdateAgent: the current agent ----------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "agent"),
    [
        ("Platform_GetAgent", {}, "agent-1"),
        ("Platform_GetAgent", {"id": "self"}, "agent-1"),
        ("Platform_GetAgent", {"id": None}, "agent-1"),
        ("Platform_GetAgent", {"id": "agent-9"}, "agent-9"),
        ("Platform_UpdateAgent", {"name": "N"}, "agent-1"),
        ("Platform_UpdateAgent", {"id": "self", "name": "N"}, "agent-1"),
        ("Platform_UpdateAgent", {"id": "agent-9", "name": "N"}, "agent-9"),
    ],
)
def test_an_omitted_id_or_self_is_the_current_agent(
    apis: FakeApis, name: str, arguments: dict[str, Any], agent: str
) -> None:
    adapter(apis, name)(CALL, arguments)
    assert sent(apis, name)["arguments"]["id"] == agent


@pytest.mark.parametrize("name", ["Platform_GetAgent", "Platform_UpdateAgent"])
def test_self_without_a_current_agent_is_invalid(apis: FakeApis, name: str) -> None:
    anonymous = dataclasses.replace(CALL, ctx=dataclasses.replace(CALL.ctx, agent=None))
    error = fails("invalid_arguments", adapter(apis, name), anonymous, {"id": "self"})
    assert "give an id" in error.message
    adapter(apis, name)(anonymous, {"id": "agent-9"})
    assert sent(apis, name)["arguments"]["id"] == "agent-9"


AGENT_FIELDS = {
    "name": "Writer 2",
    "description": "Writes",
    "systemMessage": "You write.",
    "modelName": "gpt-4.1",
    "temperature": 0.3,
    "maxTokens": 800,
    "presencePenalty": 0.5,
    "frequencyPenalty": -0.5,
    "initialMessage": "Hi!",
    "reasoningEffortLevel": "low",
}


@pytest.mark.parametrize(("field", "value"), AGENT_FIELDS.items())
def test_update_agent_changes_only_the_field_given(apis: FakeApis, field: str, value: Any) -> None:
    adapter(apis, "Platform_UpdateAgent")(CALL, {field: value})
    assert sent(apis, "Platform_UpdateAgent")["arguments"] == {
        field: value,
        "id": "agent-1",
        "replaceLists": [],
    }


def test_update_agent_fields_and_lists_together_and_null_is_not_a_change(apis: FakeApis) -> None:
    adapter(apis, "Platform_UpdateAgent")(
        CALL,
        {**AGENT_FIELDS, "skillIds": ["s1"], "subAgentIds": [], "description": None},
    )
    forwarded = sent(apis, "Platform_UpdateAgent")["arguments"]
    assert forwarded == {
        **{k: v for k, v in AGENT_FIELDS.items() if k != "description"},
        "skillIds": ["s1"],
        "subAgentIds": [],
        "id": "agent-1",
        "replaceLists": ["skillIds", "subAgentIds"],
    }
    assert "description" not in forwarded and "memoryPageIds" not in forwarded


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": -0.1}, "temperature"),
        ({"maxTokens": 0}, "maxTokens"),
        ({"presencePenalty": 3}, "presencePenalty"),
        ({"frequencyPenalty": -3}, "frequencyPenalty"),
        ({"name": ""}, "name"),
        ({"skillIds": "s1"}, "skillIds"),
        ({"model": "gpt-4.1"}, "model"),  # the reference's name is modelName
    ],
)
def test_update_agent_rejects_bad_values(
    apis: FakeApis, arguments: dict[str, Any], field: str
) -> None:
    error = fails("invalid_arguments", adapter(apis, "Platform_UpdateAgent"), CALL, arguments)
    assert f"{field}:" in error.message


@pytest.mark.parametrize(
    ("name", "arguments", "forwarded"),
    [
        ("Platform_UpdateSkill", {"id": "sk-1", "instructions": "New"}, {"instructions": "New"}),
        ("Platform_UpdateSkill", {"id": "sk-1", "name": "N", "description": None}, {"name": "N"}),
        ("Platform_UpdateMemoryPage", {"id": "mp-1", "order": 0}, {"order": 0}),
        ("Platform_UpdateMemoryPage", {"id": "mp-1", "body": ""}, {"body": ""}),
    ],
)
def test_other_updates_forward_only_the_fields_given(
    apis: FakeApis, name: str, arguments: dict[str, Any], forwarded: dict[str, Any]
) -> None:
    adapter(apis, name)(CALL, arguments)
    assert sent(apis, name)["arguments"] == {"id": arguments["id"], **forwarded}


def test_create_agent_takes_the_reference_fields(apis: FakeApis) -> None:
    adapter(apis, "Platform_CreateAgent")(CALL, AGENT_FIELDS)
    assert sent(apis, "Platform_CreateAgent")["arguments"] == AGENT_FIELDS


# -- Platform_CreateTask --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "app", "result"),
    [
        ("Write report", APP, ("t-1", "InProgress", "https://app.example.com/tasks/t-1")),
        ("Write report", None, ("t-1", "InProgress", "/tasks/t-1")),
        ("started", APP, ("t-2", "InProgress", "https://app.example.com/tasks/t-2")),
        ("odd id", None, ("t 3/x", "InProgress", "/tasks/t%203%2Fx")),
    ],
)
def test_create_task_result_is_built_here(
    apis: FakeApis, summary: str, app: str | None, result: tuple[str, str, str]
) -> None:
    created = adapter(apis, "Platform_CreateTask", platform_app_url=app)(
        TASK_CALL, {"summary": summary, "status": "in progress"}
    )
    task_id, status, url = result
    assert created == {
        "taskId": task_id,
        "summary": summary,
        "status": status,
        "button": {"label": "Open task", "url": url},
    }


def test_create_task_forwards_the_defaults_and_the_task_workspace(apis: FakeApis) -> None:
    created = adapter(apis, "Platform_CreateTask")(TASK_CALL, {"summary": "s", "status": None})
    assert created["status"] == "Todo"  # the platform said nothing: what we asked for
    body = sent(apis, "Platform_CreateTask")
    assert body["arguments"] == {"summary": "s", "prompt": "", "status": "Todo"}
    assert body["context"] == {
        "org": "org",
        "user": "user",
        "agentId": "agent-1",
        "conversationId": "conv",
        "taskWorkspaceId": "tw-1",
    }
    adapter(apis, "Platform_CreateTask")(
        TASK_CALL, {"summary": "s", "assignedChatBotName": "Writer"}
    )
    assert sent(apis, "Platform_CreateTask")["arguments"]["assignedChatBotId"] == ID


def test_create_task_needs_the_agents_task_workspace(apis: FakeApis) -> None:
    before = len(apis.requests)
    error = fails(
        "tool_not_configured", adapter(apis, "Platform_CreateTask"), CALL, {"summary": "s"}
    )
    assert "taskWorkspaceId" in error.message
    assert len(apis.requests) == before


def test_create_task_without_an_id_from_the_platform_fails(apis: FakeApis) -> None:
    error = fails(
        "provider_failed", adapter(apis, "Platform_CreateTask"), TASK_CALL, {"summary": "no id"}
    )
    assert "without its id" in error.message


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "summary: Field required"),
        ({"summary": "  "}, "summary: Value error, must not be empty"),
        ({"summary": "s", "status": "Later"}, "status"),
        ({"summary": "s", "assignedChatBotId": "not-a-uuid"}, "assignedChatBotId"),
        ({"summary": "s", "assignedChatBotName": "Twin"}, "give assignedChatBotId"),
        ({"summary": "s", "assignedChatBotName": "Nobody"}, "no accessible agent"),
        (
            {
                "summary": "s",
                "assignedChatBotName": "Writer",
                "assignedChatBotId": "22222222-2222-2222-2222-222222222222",
            },
            "different agents",
        ),
    ],
)
def test_create_task_failure_modes(apis: FakeApis, arguments: dict[str, Any], message: str) -> None:
    error = fails("invalid_arguments", adapter(apis, "Platform_CreateTask"), TASK_CALL, arguments)
    assert message in error.message


def test_create_task_in_a_workspace_the_user_cannot_write(apis: FakeApis) -> None:
    error = fails(
        "provider_failed", adapter(apis, "Platform_CreateTask"), TASK_CALL, {"summary": "locked"}
    )
    assert "HTTP 403" in error.message and "cannot write" in error.message


# -- forwarding -----------------------------------------------------------------------------


def test_platform_errors_and_configuration(apis: FakeApis) -> None:
    assert len(platform_adapters(settings(apis), UPSTREAMS)) == 21
    error = fails("provider_failed", adapter(apis, "Platform_GetAgent"), CALL, {"id": "missing"})
    assert "HTTP 404" in error.message
    error = fails(
        "tool_not_configured",
        adapter(apis, "Platform_ListSkills", platform_base_url=None),
        CALL,
        {},
    )
    assert "SIESTA_TOOLS__PLATFORM_BASE_URL" in error.message
