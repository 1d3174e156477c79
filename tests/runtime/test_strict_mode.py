"""Strict function calling (OpenAI ``strict: true`` and others that require every
property): a model sends every property, ``null`` for each optional one it leaves out.
Every system function reads such a call as the same call without those properties,
and the strict form of its schema is what such a model needs."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from runtime.functions import FUNCTIONS
from runtime.functions.base import strict_schema

REQUIRED: dict[str, dict[str, Any]] = {
    "CrawlSiteAsync": {"url": "https://example.com"},
    "GoogleSearch.Search": {"query": "weather"},
    "JsExecutorAgent": {"code": "1+1"},
    "MapSiteAsync": {"url": "https://example.com"},
    "Platform_CreateAgent": {"name": "Helper"},
    "Platform_CreateAgentFromTemplate": {"templateId": "t-1"},
    "Platform_CreateMemoryCollection": {"name": "Notes"},
    "Platform_CreateMemoryPage": {"collectionId": "c-1", "name": "Page"},
    "Platform_CreateSkill": {"name": "Skill", "instructions": "Do it"},
    "Platform_CreateTask": {"summary": "A task"},
    "Platform_GetMemoryCollection": {"id": "c-1"},
    "Platform_GetMemoryPage": {"id": "p-1"},
    "Platform_GetSkill": {"id": "s-1"},
    "Platform_GetTemplate": {"id": "t-1"},
    "Platform_ListMessages": {"conversationId": "conv-1"},
    "Platform_UpdateMemoryCollection": {"id": "c-1", "name": "Notes"},
    "Platform_UpdateMemoryPage": {"id": "p-1"},
    "Platform_UpdateSkill": {"id": "s-1"},
    "ScrapePageAsync": {"url": "https://example.com"},
    "add_chat_turn": {"memory_bank_id": "m1", "key": "u1", "content": "hi", "speaker": "user"},
    "add_memory": {"memory_bank_id": "m1", "key": "u1", "content": "likes tea"},
    "load_chat_history": {"memory_bank_id": "m1", "key": "u1"},
    "load_memory": {"memory_bank_id": "m1", "key": "u1"},
    "search_memory": {"memory_bank_id": "m1", "key": "u1", "query": "drinks"},
    "search_knowledge_base": {"query": "refund policy"},
    "file_search": {"query": "wifi password"},
    "SearchWebAsync": {"query": "weather"},
    "grep_content": {"query": "total"},
    "image_generation": {"prompt": "a cat"},
    "publishFiles": {"paths": ["report.md"]},
    "readFile": {"path": "notes.txt"},
    "readProcess": {"pid": 12},
    "runCommand": {"command": "ls"},
    "run_function_batch": {"functionName": "helper", "input": ["a", "b"]},
    "siesta_help_resolve": {"userRequest": "send an email"},
    "startProcess": {"command": "npm run dev"},
    "stopProcess": {"pid": 12},
    "web_fetch": {"url": "https://example.com"},
    "writeFile": {"path": "notes.txt", "content": "hello"},
    "writeProcessInput": {"pid": 12, "data": "y\n"},
}
"""Valid required arguments of each function (nothing for those that need none)."""


def strict_call(name: str) -> dict[str, Any]:
    """What a strict model sends for the call ``REQUIRED[name]``: every other property null."""
    properties = FUNCTIONS[name].parameters()["properties"]
    return {**dict.fromkeys(properties), **REQUIRED.get(name, {})}


def test_the_table_has_every_function_with_required_arguments() -> None:
    needing = {name for name, spec in FUNCTIONS.items() if spec.parameters()["required"]}
    assert needing == set(REQUIRED)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_optional_argument_sent_as_null_means_not_given(name: str) -> None:
    spec = FUNCTIONS[name]
    assert spec.parse(strict_call(name)) == spec.parse(dict(REQUIRED.get(name, {})))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_strict_schema_requires_every_property_and_takes_the_strict_call(name: str) -> None:
    strict = strict_schema(FUNCTIONS[name].parameters())
    assert sorted(strict["required"]) == sorted(strict["properties"])
    assert strict["additionalProperties"] is False
    jsonschema.validate(strict_call(name), strict)
    # What the strict form allows beyond the standard one is only null for optionals.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**strict_call(name), "unknown": 1}, strict)


@pytest.mark.parametrize(
    "name", sorted(n for n, spec in FUNCTIONS.items() if spec.parameters()["required"])
)
def test_null_for_a_required_argument_is_refused(name: str) -> None:
    spec = FUNCTIONS[name]
    first = next(iter(REQUIRED[name]))
    with pytest.raises(Exception, match="bad arguments"):
        spec.parse({**REQUIRED[name], first: None})


def test_nested_objects_get_the_strict_form_too() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {"tag": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["tag"],
            },
            "free": {"type": "object"},
        },
        "required": [],
    }
    strict = strict_schema(schema)
    inner = strict["properties"]["filter"]["anyOf"][0]
    assert inner["required"] == ["tag", "limit"] and inner["additionalProperties"] is False
    assert inner["properties"]["limit"]["anyOf"][1] == {"type": "null"}
    assert inner["properties"]["tag"] == {"type": "string"}
    # An object of any keys has no strict form: left as it is.
    assert strict["properties"]["free"]["anyOf"][0] == {"type": "object"}
    assert schema["properties"]["filter"]["required"] == ["tag"]  # the input is not changed
