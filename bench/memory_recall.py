"""Recall of ``search_memory`` on paraphrased queries, beside plain keyword matching.

    python -m bench.memory_recall        (also a step of ``make bench``)

A small labelled set: 40 facts under two keys (20 each: a person an assistant
remembers, a team's engineering facts), and for each fact one question that asks for
it in other words, as a user would ("which days do we ship releases?" for "Deploys to
production happen on Tuesdays and Thursdays"). Each question is searched within its
fact's key through the real bank code (``MemoryBanks`` on SQLite), and counts as found
when its fact is among the first 5 (recall@5) or first (recall@1). The baseline is
plain keyword matching: the key's entries that share a lowercase word with the
question, most shared words first. The lexical fallback (BM25) is measured too. Then
the cost: embedding one entry, loading the model, and a search over a full key.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from siesta_contract.memory import MemoryBankCreate

from bench.measures import Figure
from runtime.memory.banks import MemoryBanks
from runtime.memory.embedding import Embedder
from runtime.memory.settings import MemorySettings
from runtime.memory.wordllama import WordLlamaModel
from runtime.seams.stores import MemoryStore
from runtime.store.sqlite import open_sqlite

ORG = "org-bench"
LABELLED: dict[str, list[tuple[str, str]]] = {
    "user-maria": [
        ("Maria prefers window seats on flights", "which seat does she want on a plane?"),
        ("Her daughter Sofia was born in 2015", "how old is her kid?"),
        ("Maria is vegetarian and never eats meat", "any dietary restrictions for dinner?"),
        ("She is allergic to penicillin", "which antibiotics should she avoid?"),
        ("Maria works as a pediatric nurse at St. Mary's hospital", "what is her job?"),
        ("Her favourite band is Radiohead", "what music does she enjoy listening to?"),
        ("She drives a blue 2019 Toyota Prius", "what car does she own?"),
        ("Maria's wedding anniversary is on June 12", "when did she get married?"),
        ("She runs a half marathon every spring", "what sports or exercise does she do?"),
        ("Maria speaks Portuguese and Spanish fluently", "which languages can she talk in?"),
        ("Her cat is named Biscuit", "does she have any pets?"),
        ("She lives in a flat in Porto near the river", "where is her home?"),
        (
            "Maria prefers to be contacted by text message, not phone calls",
            "what's the best way to reach her?",
        ),
        ("She dislikes spicy food", "should I order something hot with chilli for her?"),
        ("Her bank is Millennium BCP", "where does she keep her money?"),
        ("Maria is learning to play the cello", "which instrument is she practising?"),
        ("She wakes up at 6 am on weekdays", "what time does her morning start?"),
        ("Her brother Tiago lives in London", "does she have siblings abroad?"),
        ("Maria's shoe size is 38", "what size footwear should I buy her?"),
        ("She is saving for a trip to Japan next year", "which country does she want to visit?"),
    ],
    "team-platform": [
        (
            "Deploys to production happen on Tuesdays and Thursdays after the standup",
            "which days do we ship releases?",
        ),
        ("The staging database runs PostgreSQL 15", "what postgres version is in the test env?"),
        ("The on-call rotation changes every Monday at 10:00", "when is the pager handover?"),
        (
            "The API gateway times out requests after 30 seconds",
            "how long before a slow call gets cut off?",
        ),
        ("Logs are kept for 14 days in Loki", "what is our log retention?"),
        ("The build pipeline runs on GitHub Actions", "which CI system do we use?"),
        ("Secrets are stored in HashiCorp Vault", "where do we keep passwords and API keys?"),
        (
            "The mobile app is written in Kotlin and Swift",
            "which languages is the phone client built with?",
        ),
        ("Our error budget is 99.9% availability per month", "what is the uptime SLO?"),
        ("Feature flags are managed in LaunchDarkly", "how do we toggle unfinished features?"),
        ("The team lead is Priya Raman", "who manages the group?"),
        (
            "Incidents are reported in the #ops-alerts Slack channel",
            "where should I post when something breaks?",
        ),
        (
            "Backups of the main database are taken every night at 2 am",
            "how often is data snapshotted?",
        ),
        ("The frontend uses React with TypeScript", "what web framework is the UI made with?"),
        (
            "Code review needs two approvals before merging",
            "how many reviewers must sign off on a pull request?",
        ),
        (
            "The office VPN is WireGuard",
            "what do I connect with to reach internal services from home?",
        ),
        (
            "Load tests run every Friday against the staging cluster",
            "when do we do performance testing?",
        ),
        (
            "Kubernetes clusters run in the eu-west-1 region",
            "which AWS location hosts our containers?",
        ),
        ("The search service uses Elasticsearch 8", "what engine powers full-text queries?"),
        (
            "New hires get a laptop on their first day from IT",
            "when do newcomers receive their computer?",
        ),
    ],
}
FULL_KEY = MemorySettings().max_entries_per_key
"""Entries of the key a search's cost is measured over: the most a key may hold."""
_WORD = re.compile(r"\w+")


def keyword_ranking(query: str, facts: list[str]) -> list[str]:
    """Plain keyword matching: facts sharing a lowercase word, most shared first."""
    wanted = set(_WORD.findall(query.lower()))
    shared = [(len(wanted & set(_WORD.findall(fact.lower()))), fact) for fact in facts]
    return [fact for count, fact in sorted(shared, key=lambda s: -s[0]) if count]


def recall(rankings: list[tuple[str, list[str]]], k: int) -> float:
    """Percentage of questions whose fact is among the first ``k`` results."""
    return 100 * sum(expected in found[:k] for expected, found in rankings) / len(rankings)


def measure() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="siesta-bench-memory-") as tmp:
        stores = open_sqlite(Path(tmp) / "siesta.db")
        try:
            return _measure(stores.memory)
        finally:
            stores.close()


def _measure(store: MemoryStore) -> list[Figure]:
    started = time.perf_counter()
    model = WordLlamaModel()
    load_seconds = time.perf_counter() - started
    semantic = MemoryBanks(store, MemorySettings(), Embedder(lambda: model))
    lexical = MemoryBanks(store, MemorySettings(embedding="lexical"))
    bank = semantic.create(ORG, MemoryBankCreate(name="bench", type="general")).bank_id
    for key, pairs in LABELLED.items():
        for fact, _ in pairs:
            semantic.add(ORG, bank, key, fact, None, "add_memory")

    def ranked(banks: MemoryBanks) -> list[tuple[str, list[str]]]:
        return [
            (fact, [r.content for r in banks.search(ORG, bank, key, query, 5).results])
            for key, pairs in LABELLED.items()
            for fact, query in pairs
        ]

    ours, fallback = ranked(semantic), ranked(lexical)
    keyword = [
        (fact, keyword_ranking(query, [f for f, _ in pairs]))
        for pairs in LABELLED.values()
        for fact, query in pairs
    ]
    facts = [fact for pairs in LABELLED.values() for fact, _ in pairs]
    embed_ms = [_ms(partial(model.embed, [fact])) for fact in facts * 5]
    search_ms = _full_key_search(semantic, bank, facts)
    n = len(facts)
    return [
        _recall_figure(f"search_memory recall@5, {n} paraphrased questions", ours, keyword, 5),
        _recall_figure(f"search_memory recall@1, {n} paraphrased questions", ours, keyword, 1),
        _recall_figure("lexical fallback (BM25) recall@5", fallback, keyword, 5),
        Figure("embed one entry (wordllama), p50", statistics.median(embed_ms), "ms"),
        Figure("load the embedding model (first use)", load_seconds, "s"),
        Figure(f"search_memory over {FULL_KEY} entries of a key, p50", search_ms, "ms"),
    ]


def _recall_figure(
    name: str, ours: list[tuple[str, list[str]]], keyword: list[tuple[str, list[str]]], k: int
) -> Figure:
    mine, baseline = recall(ours, k), recall(keyword, k)
    return Figure(
        name,
        mine,
        "%",
        "keyword matching",
        baseline,
        "above keyword matching",
        mine > baseline,
    )


def _full_key_search(banks: MemoryBanks, bank: str, facts: list[str]) -> float:
    for i in range(FULL_KEY):
        banks.add(ORG, bank, "full", f"{facts[i % len(facts)]} (note {i})", None, "add_memory")
    return statistics.median(
        _ms(lambda: banks.search(ORG, bank, "full", "which days do we ship releases?", 10))
        for _ in range(20)
    )


def _ms(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def main() -> int:
    from bench.suite import render

    print(render(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
