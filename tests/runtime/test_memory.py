"""Memory search below HTTP: the model loaded offline and once, the lexical fallback
when it cannot be, and BM25 itself (``runtime/memory``)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from siesta_contract.memory import MemoryBankCreate

from runtime.memory.banks import MemoryBanks
from runtime.memory.embedding import Embedder, Model, load_wordllama
from runtime.memory.lexical import bm25, terms
from runtime.memory.settings import MemorySettings
from runtime.memory.wordllama import NAME, WordLlamaModel
from runtime.seams.stores import Stores
from runtime.store.sqlite import open_sqlite

GENERAL = MemoryBankCreate(name="facts", type="general")


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_sqlite(tmp_path / "siesta.db")
    yield opened
    opened.close()


def test_the_model_loads_from_the_package_without_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*_: Any) -> None:
        msg = "the model must not reach the network"
        raise AssertionError(msg)

    monkeypatch.setattr(socket.socket, "connect", no_network)
    model = WordLlamaModel()
    first, second = model.embed(["dark mode in the editor", "peanuts"])
    assert len(first) == len(second) == 256 * 4 and model.name == NAME
    near, far = model.similarities("which colour scheme", [first, second])
    assert 0.99 < model.similarities("dark mode in the editor", [first])[0] < 1.01  # unit length
    assert near > far


def test_a_model_that_cannot_load_leaves_search_lexical_and_says_why(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    attempts = []

    def broken() -> Model:
        attempts.append(1)
        msg = "No module named 'wordllama'"
        raise ImportError(msg)

    banks = MemoryBanks(stores.memory, MemorySettings(), Embedder(broken))
    bank = banks.create("org-a", GENERAL).bank_id
    with caplog.at_level(logging.WARNING):
        banks.add("org-a", bank, "k", "Deploys happen on Tuesdays", None, "add_memory")
        first = banks.search("org-a", bank, "k", "when do deploys happen", 5)
        banks.search("org-a", bank, "k", "tuesdays", 5)
    assert first.method == "lexical"
    assert first.note is not None and "No module named 'wordllama'" in first.note
    assert [r.content for r in first.results] == ["Deploys happen on Tuesdays"]
    assert len(attempts) == 1  # tried once, logged once
    assert sum("falls back to lexical" in r.message for r in caplog.records) == 1


def test_entries_written_without_the_model_are_embedded_when_searched(stores: Stores) -> None:
    lexical = MemoryBanks(stores.memory, MemorySettings(embedding="lexical"), Embedder())
    bank = lexical.create("org-a", GENERAL).bank_id
    for fact in ("Bob is allergic to peanuts", "The staging database runs Postgres 15"):
        lexical.add("org-a", bank, "k", fact, None, "add_memory")
    semantic = MemoryBanks(stores.memory, MemorySettings(), Embedder())
    found = semantic.search("org-a", bank, "k", "food he cannot eat", 1)
    assert found.method == "semantic"
    assert [r.content for r in found.results] == ["Bob is allergic to peanuts"]


def test_threads_that_search_at_once_load_the_model_once() -> None:
    loads = []

    def slow() -> Model:
        loads.append(1)
        time.sleep(0.2)
        return load_wordllama()

    embedder = Embedder(slow)
    threads = [threading.Thread(target=embedder.model) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and embedder.model() is load_wordllama()


def test_bm25_ranks_rarer_shared_words_higher_and_unrelated_text_zero() -> None:
    documents = ["the cat sat", "the dog sat", "the deploys run on tuesdays", "nothing here"]
    scores = bm25("when does the deploy run", documents)
    assert scores.index(max(scores)) == 2
    assert scores[3] == 0.0
    assert bm25("cat", []) == []
    assert terms("Deploys, deploying DEPLOYED") == ["deploy", "deploy", "deploy"]


def test_the_model_is_loaded_by_the_first_write_or_search_only(stores: Stores) -> None:
    loads = []

    def counted() -> Model:
        loads.append(1)
        return load_wordllama()

    banks = MemoryBanks(stores.memory, MemorySettings(), Embedder(counted))
    bank = banks.create("org-a", GENERAL).bank_id
    banks.list("org-a")
    banks.load("org-a", bank, "k", "newest_first", 10, "load_memory")
    assert loads == []  # an idle service, or one that only lists, never pays for it
    banks.add("org-a", bank, "k", "first fact", None, "add_memory")
    banks.search("org-a", bank, "k", "fact", 1)
    assert loads == [1]
