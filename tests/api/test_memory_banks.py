"""Memory banks over HTTP (the app in this process, SQLite): operators make an org's
banks, agents remember and recall through ``POST /v1/tools/execute``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_tools import execute
from tests.helpers import TOKEN
from tests.inprocess import InProcessService, in_process_service

AGENT = {"id": "agent-1", "systemToolIds": ["memory_banks"]}
USER = {"id": "user-1", "role": "User"}


def org(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "X-Siesta-Org": name}


A, B = org("org-a"), org("org-b")
LIMITS = {"SIESTA_MEMORY__MAX_ENTRIES_PER_KEY": "8"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {"SIESTA_PROVIDER__TYPE": "fake", **LIMITS}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def make_bank(
    service: InProcessService, kind: str, headers: dict[str, str] = A, **more: Any
) -> str:
    body = {"name": f"{kind} notes", "description": "what users said", "type": kind, **more}
    made = service.client.post("/v1/memory-banks", headers=headers, json=body)
    assert made.status_code == 201, made.text
    bank_id: str = made.json()["memoryBankId"]
    return bank_id


def call(
    service: InProcessService, function: str, headers: dict[str, str] = A, **arguments: Any
) -> dict[str, Any]:
    return execute(service, "conv-1", function, arguments, AGENT, headers)


def result(service: InProcessService, function: str, **arguments: Any) -> Any:
    outcome = call(service, function, **arguments)
    assert outcome["ok"], outcome
    return outcome["result"]


def error(service: InProcessService, function: str, **arguments: Any) -> dict[str, Any]:
    outcome = call(service, function, **arguments)
    assert not outcome["ok"], outcome
    found: dict[str, Any] = outcome["error"]
    return found


FACTS = [
    "The user prefers dark mode in every editor",
    "Alice's birthday is on March 3rd",
    "Deploys happen on Tuesdays after the standup",
    "The staging database runs Postgres 15",
    "Bob is allergic to peanuts",
]


def test_an_agent_remembers_facts_and_finds_one_by_its_meaning(service: InProcessService) -> None:
    bank = make_bank(service, "general")
    listed = result(service, "list_memory_banks")["memoryBanks"]
    assert {
        "memoryBankId": bank,
        "name": "general notes",
        "description": "what users said",
        "type": "general",
        "mode": "read_write",
    } in listed
    for n, fact in enumerate(FACTS, 1):
        added = result(service, "add_memory", memory_bank_id=bank, key="user-7", content=fact)
        assert (added["entries"], added["limitEntries"]) == (n, 8)
        assert added["entry"]["content"] == fact and added["entry"]["speaker"] is None

    found = result(
        service, "search_memory", memory_bank_id=bank, key="user-7", query="what day do we ship"
    )
    assert found["method"] == "semantic" and found["searched"] == 5
    assert found["results"][0]["content"] == "Deploys happen on Tuesdays after the standup"
    scores = [r["score"] for r in found["results"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 5
    top = result(service, "search_memory", memory_bank_id=bank, key="user-7", query="food", top_n=1)
    assert [r["content"] for r in top["results"]] == ["Bob is allergic to peanuts"]
    other_key = result(service, "search_memory", memory_bank_id=bank, key="user-8", query="food")
    assert other_key["results"] == [] and other_key["searched"] == 0

    newest = result(service, "load_memory", memory_bank_id=bank, key="user-7", limit=2)
    assert [e["content"] for e in newest["entries"]] == FACTS[:-3:-1]  # newest first: default
    assert (newest["total"], newest["limit"], newest["order"]) == (5, 2, "newest_first")
    oldest = result(service, "load_memory", memory_bank_id=bank, key="user-7", order="oldest_first")
    assert [e["content"] for e in oldest["entries"]] == FACTS  # limit 50 by default


def test_a_conversation_bank_keeps_turns_with_their_speaker(service: InProcessService) -> None:
    bank = make_bank(service, "conversation")
    turns = [("user", "Book me a table for two"), ("assistant", "For which evening?")]
    for speaker, text in [*turns, ("user", "Friday, please")]:
        result(
            service, "add_chat_turn", memory_bank_id=bank, key="c1", content=text, speaker=speaker
        )
    first = result(
        service, "load_chat_history", memory_bank_id=bank, key="c1", order="oldest_first", limit=2
    )
    assert [(e["speaker"], e["content"]) for e in first["entries"]] == turns
    assert first["total"] == 3
    last = result(service, "load_chat_history", memory_bank_id=bank, key="c1", limit=1)
    assert [e["content"] for e in last["entries"]] == ["Friday, please"]
    found = result(service, "search_memory", memory_bank_id=bank, key="c1", query="restaurant")
    assert found["results"][0]["speaker"] == "user"


def test_each_function_is_for_one_type_of_bank_and_says_which_to_use(
    service: InProcessService,
) -> None:
    general, chat = make_bank(service, "general"), make_bank(service, "conversation")
    turn = {"key": "k", "content": "hello", "speaker": "user"}
    wrong = [
        (error(service, "add_memory", memory_bank_id=chat, key="k", content="x"), "add_chat_turn"),
        (error(service, "add_chat_turn", memory_bank_id=general, **turn), "add_memory"),
        (error(service, "load_memory", memory_bank_id=chat, key="k"), "load_chat_history"),
        (error(service, "load_chat_history", memory_bank_id=general, key="k"), "load_memory"),
    ]
    for problem, instead in wrong:
        assert problem["code"] == "invalid_arguments"
        assert problem["use"] == instead and f"use {instead}" in problem["message"]
    bad = error(service, "load_memory", memory_bank_id=general, key="k", limit=201)
    assert bad["code"] == "invalid_arguments" and "limit" in bad["message"]
    bad_speaker = error(service, "add_chat_turn", memory_bank_id=chat, **{**turn, "speaker": "bot"})
    assert bad_speaker["code"] == "invalid_arguments"


def test_another_org_never_sees_searches_writes_or_deletes_a_bank(
    service: InProcessService,
) -> None:
    bank = make_bank(service, "general", headers=org("org-iso"))
    result_a = call(
        service, "add_memory", org("org-iso"), memory_bank_id=bank, key="k", content="secret"
    )
    assert result_a["ok"]
    assert service.client.get("/v1/memory-banks", headers=B).json()["memoryBanks"] == []
    for response in (
        service.client.get(f"/v1/memory-banks/{bank}", headers=B),
        service.client.delete(f"/v1/memory-banks/{bank}", headers=B),
        service.client.post(
            f"/v1/memory-banks/{bank}/entries", headers=B, json={"key": "k", "content": "x"}
        ),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "memory_bank_not_found"
    for function, arguments in (
        ("add_memory", {"content": "planted"}),
        ("search_memory", {"query": "secret"}),
        ("load_memory", {}),
    ):
        outcome = call(service, function, B, memory_bank_id=bank, key="k", **arguments)
        assert outcome["error"]["code"] == "memory_bank_not_found", outcome
    listed = [b["memoryBankId"] for b in result(service, "list_memory_banks")["memoryBanks"]]
    assert bank not in listed  # org-a's agent does not list it either
    mine = call(service, "load_memory", org("org-iso"), memory_bank_id=bank, key="k")
    assert [e["content"] for e in mine["result"]["entries"]] == ["secret"]


def test_a_read_only_bank_is_filled_by_operators_and_only_read_by_agents(
    service: InProcessService,
) -> None:
    bank = make_bank(service, "general", mode="read_only")
    refused = error(service, "add_memory", memory_bank_id=bank, key="policy", content="x")
    assert refused["code"] == "memory_bank_read_only"
    added = service.client.post(
        f"/v1/memory-banks/{bank}/entries",
        headers=A,
        json={"key": "policy", "content": "Refunds are allowed within 30 days of purchase"},
    )
    assert added.status_code == 201, added.text
    found = result(
        service, "search_memory", memory_bank_id=bank, key="policy", query="can I get my money back"
    )
    assert found["results"][0]["content"].startswith("Refunds")
    no_speaker = service.client.post(
        f"/v1/memory-banks/{make_bank(service, 'conversation')}/entries",
        headers=A,
        json={"key": "k", "content": "hi"},
    )
    assert no_speaker.status_code == 422
    assert no_speaker.json()["error"]["code"] == "invalid_arguments"


def test_deleting_a_bank_deletes_its_entries(service: InProcessService) -> None:
    bank = make_bank(service, "general")
    result(service, "add_memory", memory_bank_id=bank, key="k", content="kept until deleted")
    assert service.client.get(f"/v1/memory-banks/{bank}", headers=A).json()["type"] == "general"
    assert service.client.delete(f"/v1/memory-banks/{bank}", headers=A).status_code == 204
    assert service.client.get(f"/v1/memory-banks/{bank}", headers=A).status_code == 404
    gone = error(service, "search_memory", memory_bank_id=bank, key="k", query="kept")
    assert gone["code"] == "memory_bank_not_found"


def test_the_catalog_offers_the_six_functions_when_the_tool_is_assigned(
    service: InProcessService,
) -> None:
    def catalog(tools: list[str]) -> dict[str, Any]:
        response = service.client.post(
            "/v1/tools/catalog",
            headers=A,
            json={"agent": {"id": "a", "systemToolIds": tools}, "user": USER, "org": "org-a"},
        )
        assert response.status_code == 200, response.text
        return {f["name"]: f for f in response.json()["functions"]}

    offered = catalog(["memory_banks"])
    assert list(offered) == [
        "list_memory_banks",
        "add_chat_turn",
        "add_memory",
        "search_memory",
        "load_chat_history",
        "load_memory",
    ]
    search = offered["search_memory"]["parameters"]["properties"]["top_n"]
    assert (search["anyOf"][0]["minimum"], search["anyOf"][0]["maximum"]) == (1, 50)
    assert offered["add_memory"]["policy"] == "enabled"
    assert "own memory banks" in offered["add_memory"]["policyReason"]
    assert not set(catalog(["js_executor"])) & set(offered)
    system = service.client.get("/v1/tools/system", headers=A).json()["systemTools"]
    listed = next(tool for tool in system if tool["id"] == "memory_banks")
    assert listed["available"] and listed["functions"] == list(offered)


def test_operators_changes_to_banks_are_audited_without_their_content(
    service: InProcessService,
) -> None:
    bank_id = make_bank(service, "general", name="secret-name")
    added = service.client.post(
        f"/v1/memory-banks/{bank_id}/entries",
        headers=A,
        json={"key": "secret-key", "content": "secret content"},
    )
    assert added.status_code == 201, added.text
    assert service.client.delete(f"/v1/memory-banks/{bank_id}", headers=A).status_code == 204
    trail = service.client.get(
        "/v1/admin/audit", headers=A, params={"target": f"org-a/{bank_id}"}
    ).json()["entries"]
    assert [e["action"] for e in trail] == [
        "memory_bank.delete",
        "memory_bank.add_entry",
        "memory_bank.create",
    ]
    assert "secret" not in str(trail)
