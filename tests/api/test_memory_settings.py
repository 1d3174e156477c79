"""Memory bank settings over HTTP, each in a service of its own: every limit a refusal
names, and lexical ranking (``SIESTA_MEMORY__EMBEDDING=lexical``)."""

from __future__ import annotations

import pytest

from tests.api.test_memory_banks import FACTS, A, error, make_bank, result
from tests.inprocess import in_process_service


def test_every_limit_refused_names_itself(tmp_path_factory: pytest.TempPathFactory) -> None:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_MEMORY__EMBEDDING": "lexical",
        "SIESTA_MEMORY__MAX_BANKS_PER_ORG": "1",
        "SIESTA_MEMORY__MAX_ENTRIES_PER_KEY": "2",
        "SIESTA_MEMORY__MAX_CONTENT_CHARS": "20",
        "SIESTA_MEMORY__MAX_KEY_CHARS": "8",
        "SIESTA_MEMORY__MAX_QUERY_CHARS": "10",
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as service:
        bank = make_bank(service, "general")
        second = service.client.post(
            "/v1/memory-banks", headers=A, json={"name": "n", "type": "general"}
        )
        assert second.status_code == 409
        assert second.json()["error"]["limit"] == 1
        assert "SIESTA_MEMORY__MAX_BANKS_PER_ORG" in second.json()["error"]["message"]

        for text in ("one", "two"):
            result(service, "add_memory", memory_bank_id=bank, key="k", content=text)
        full = error(service, "add_memory", memory_bank_id=bank, key="k", content="three")
        assert (full["code"], full["limit"], full["scope"]) == ("memory_limit_reached", 2, "key")
        assert "SIESTA_MEMORY__MAX_ENTRIES_PER_KEY" in full["message"]
        for function, arguments, limit in (
            ("add_memory", {"key": "k2", "content": "x" * 21}, 20),
            ("add_memory", {"key": "k" * 9, "content": "x"}, 8),
            ("search_memory", {"key": "k", "query": "q" * 11}, 10),
        ):
            long = error(service, function, memory_bank_id=bank, **arguments)
            assert (long["code"], long["limit"]) == ("invalid_arguments", limit), long
            assert "_CHARS" in long["message"]


def test_lexical_search_ranks_by_shared_words_and_says_so(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_MEMORY__EMBEDDING": "lexical"}
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as service:
        bank = make_bank(service, "general")
        for fact in FACTS:
            result(service, "add_memory", memory_bank_id=bank, key="u", content=fact)
        found = result(
            service, "search_memory", memory_bank_id=bank, key="u", query="which database?"
        )
        assert found["method"] == "lexical" and found["note"] is None
        assert [r["content"] for r in found["results"]] == ["The staging database runs Postgres 15"]
        unrelated = result(service, "search_memory", memory_bank_id=bank, key="u", query="food")
        assert unrelated["results"] == []  # no word in common: nothing, not noise
