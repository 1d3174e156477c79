"""Knowledge bases: recall on paraphrased questions, search at 100,000 passages, and
indexing throughput.

    python -m bench.knowledge [--quick]        (also a step of ``make bench``)

The corpus is generated (seeded, so every run has the same one): profiles of fictional
towns, each a document of five sections (history, economy, climate, festivals,
travel), each section one fact among sentences of filler. Each question asks for one
fact in other words than the document's ("Who established Brackwater?" for "was
founded in 1843 by Amelia Thorne"), naming its town as a user would. A question is
answered when the passage holding its fact is among the first 5 results (recall@5,
the passage, not just the document). BM25 alone and the embeddings alone are
measured beside the hybrid ranking that search uses.

Then the cost, through the real code on SQLite: indexing documents (extract, cut,
embed, store; passages per second on this machine), and ``KnowledgeBases.search`` over
a base of 100,000 passages (p50 and p95; the first search, which builds the index from
the store, apart).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from siesta_contract.knowledge import DocumentAdd, KnowledgeBaseCreate, TextDocument

from bench.common import percentile
from bench.measures import Figure
from runtime.core.knowledge_records import ContentVersion, KnowledgeChunk
from runtime.files.conversation import ConversationFiles, LocalBlobStore
from runtime.files.settings import FileSettings
from runtime.knowledge.bases import KnowledgeBases
from runtime.knowledge.chunking import embedding_text, passages
from runtime.knowledge.documents import DocumentSources, Indexing
from runtime.knowledge.index import BaseIndex
from runtime.knowledge.settings import KnowledgeSettings
from runtime.memory.embedding import Embedder
from runtime.memory.wordllama import WordLlamaModel
from runtime.seams.stores import KnowledgeStore, Stores
from runtime.store.sqlite import open_sqlite

ORG = "org-bench"
SEED = 20261207
SYLLABLES = [
    "brack",
    "wa",
    "ter",
    "hol",
    "min",
    "ster",
    "dun",
    "vel",
    "ash",
    "ford",
    "lin",
    "car",
    "mor",
    "ton",
    "bel",
    "gar",
    "eth",
    "wick",
]
FOUNDERS = ["Amelia Thorne", "Jonas Pell", "Greta Varn", "Elias Crowe", "Maud Ferris",
            "Tobias Lind", "Ines Carrow", "Hugo Stamm", "Orla Finch", "Piet Moller"]  # fmt: skip
TRADES = ["tanner", "miller", "salt merchant", "shipwright", "wool trader", "blacksmith"]
RIVERS = ["Esk", "Tarn", "Lune", "Wye", "Ouse", "Derwent", "Calder", "Ribble"]
INDUSTRIES = ["fishing and canning", "wind turbine assembly", "cheese making", "glass blowing",
              "software consulting", "timber and sawmills", "tourism and hotels"]  # fmt: skip
COMPANIES = ["Northwind Works", "Harbor Foods", "Pell & Sons", "Crowe Glass", "Lindqvist Timber"]
WINTERS = ["long and snowy", "mild and rainy", "bitterly cold with frozen lakes", "grey and windy"]
SUMMERS = ["dry heat and forest fires", "cool sea fogs", "warm evenings and thunderstorms"]
MONTHS = ["March", "May", "July", "September", "November"]
FESTIVALS = ["Lantern Fair", "Harvest Parade", "River Regatta", "Salt Feast", "Midsummer Market"]
ACTIVITIES = ["boat races on the river", "street music and dancing", "baking contests"]
LINES = ["Coastal", "Valley", "Northern", "Highland", "Riverside"]
FILLER = [
    "Visitors often remark on the narrow cobbled lanes near the square.",
    "The parish records were partly lost in a fire long ago.",
    "Local historians still argue about the origin of the name.",
    "A small museum keeps photographs from the last two centuries.",
    "The council meets on the first Monday of each month.",
    "Several families have lived here for more than six generations.",
]


@dataclass(frozen=True)
class Question:
    text: str
    town: str
    section: str


def town_name(rng: random.Random, taken: set[str]) -> str:
    """A new name: syllables, numbered once those run out (the 100,000-passage base has
    more towns than there are names of three syllables)."""
    name = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))).capitalize()
    unique, number = name, 1
    while unique in taken:
        number += 1
        unique = f"{name} {number}"
    taken.add(unique)
    return unique


def document(rng: random.Random, town: str, hard: bool) -> tuple[str, list[Question]]:
    """A town's profile in Markdown, and one question per section that has one.

    Five sections hold the facts questions ask for; five more are about other things,
    as a profile's other sections are. ``hard``: those five share the questions' words
    but not their meaning ("earned a living in the old workshops, now closed" beside
    "What do people mostly earn their living from nowadays?"), so neither matching words
    nor averaging word vectors can tell them apart: the limit of both methods."""
    founder, trade, river = rng.choice(FOUNDERS), rng.choice(TRADES), rng.choice(RIVERS)
    industry, company = rng.choice(INDUSTRIES), rng.choice(COMPANIES)
    winter, summer = rng.choice(WINTERS), rng.choice(SUMMERS)
    month, festival, activity = rng.choice(MONTHS), rng.choice(FESTIVALS), rng.choice(ACTIVITIES)
    line, km = rng.choice(LINES), rng.randint(8, 140)
    year = rng.randint(1100, 1900)
    facts = {
        "History": (
            f"{town} was founded in {year} by {founder}, a {trade} who settled by the "
            f"{river} river.",
            f"Who established {town} and in what year?",
        ),
        "Economy": (
            f"Most of the income in {town} today comes from {industry}; the largest "
            f"employer is {company}.",
            f"What do people in {town} mostly earn their living from nowadays?",
        ),
        "Climate": (
            f"Winters in {town} are {winter}, and summers bring {summer}.",
            f"What weather should I expect in {town} during the cold season?",
        ),
        "Festivals": (
            f"Every {month} the town holds the {festival}, a week of {activity}.",
            f"Which yearly celebration takes place in {town}?",
        ),
        "Travel": (
            f"{town} is reached by the {line} railway line; the nearest airport is {km} km away.",
            f"How can a visitor get to {town}?",
        ),
    }
    distractors = _hard_distractors(rng, town) if hard else _other_sections(rng, town)
    sections: list[tuple[str, str, str | None]] = [
        (name, fact, question) for name, (fact, question) in facts.items()
    ]
    sections += [(name, text, None) for name, text in distractors.items()]
    rng.shuffle(sections)
    parts = [f"# {town}"]
    questions = []
    for section, fact, question in sections:
        noise = rng.sample(FILLER, 3)
        parts.append(f"## {section}\n\n{' '.join([*noise[:2], fact, noise[2]])}")
        if question is not None:
            questions.append(Question(question, town, section))
    return "\n\n".join(parts), questions


def _other_sections(rng: random.Random, town: str) -> dict[str, str]:
    river = rng.choice(RIVERS)
    return {
        "Schools": f"The grammar school of {town} teaches {rng.randint(80, 900)} pupils in a "
        "building of red brick.",
        "Geography": f"{town} lies {rng.randint(2, 90)} km from the coast on a chalk ridge "
        f"above the {river} valley.",
        "Sport": f"The rowing club of {town} trains on the {river} every weekend.",
        "Crafts": f"Workshops of {rng.choice(TRADES)}s still line the old harbour of {town}.",
        "Roads": f"Cyclists follow the towpath along the {river}; the main road out of "
        f"{town} has a toll.",
    }


def _hard_distractors(rng: random.Random, town: str) -> dict[str, str]:
    return {
        "Schools": f"The grammar school of {town} was established in {rng.randint(1700, 1990)} "
        f"by the guild of {rng.choice(TRADES)}s and teaches {rng.randint(80, 900)} pupils.",
        "Geography": f"{town} lies {rng.randint(2, 90)} km from the coast, and in the cold "
        f"season the {rng.choice(RIVERS)} river can freeze for weeks.",
        "Sport": f"The {town} rowing club takes place on the river each "
        f"{rng.choice(MONTHS)}, a yearly race that visitors come to watch.",
        "Crafts": f"In the past people in {town} earned their living in the old "
        f"{rng.choice(TRADES)} workshops, which have all closed.",
        "Roads": f"A toll road built in {rng.randint(1750, 1950)} lets a visitor get from "
        f"{town} to the {rng.choice(LINES)} valley by car.",
    }


def corpus(
    n: int, seed: int = SEED, hard: bool = False
) -> tuple[list[tuple[str, str]], list[Question]]:
    """``n`` documents (name, Markdown) and, per document, one of its five questions."""
    rng = random.Random(seed)
    taken: set[str] = set()
    docs, questions = [], []
    for _ in range(n):
        town = town_name(rng, taken)
        text, asked = document(rng, town, hard)
        docs.append((f"{town.lower()}.md", text))
        questions.append(rng.choice(asked))
    return docs, questions


def measure(quick: bool = False) -> list[Figure]:
    model = WordLlamaModel()
    figures = _recall_figures(model)
    with tempfile.TemporaryDirectory(prefix="siesta-bench-knowledge-") as tmp:
        figures += _throughput(model, Path(tmp), 50 if quick else 200)
        figures += _search_at_scale(model, Path(tmp), 20_000 if quick else 100_000)
    return figures


def _recall(model: WordLlamaModel, hard: bool) -> dict[str, float]:
    """Recall@5 (percent) of each method: ``hybrid``, ``lexical``, ``semantic``."""
    docs, questions = corpus(200, hard=hard)
    chunks: list[KnowledgeChunk] = []
    texts: list[str] = []
    for name, text in docs:
        for seq, p in enumerate(passages(text, 1200, 200)):
            chunks.append(KnowledgeChunk(name, seq, p.heading, p.text, p.start))
            texts.append(embedding_text(p))
    vectors = _embed(model, texts)
    index = BaseIndex([_with(c, v) for c, v in zip(chunks, vectors, strict=True)])

    def answered(hits: list[int], q: Question) -> bool:
        return any(
            index.chunks[i].version_id == f"{q.town.lower()}.md"
            and index.chunks[i].heading.endswith(q.section)
            for i in hits[:5]
        )

    found = {"hybrid": 0, "lexical": 0, "semantic": 0}
    for q in questions:
        vector = np.frombuffer(model.embed([q.text])[0], dtype="<f4")
        rankings = {
            "hybrid": index.hybrid(vector, q.text, 5),
            "lexical": index.lexical(q.text, 5),
            "semantic": index.semantic(vector, 5),
        }
        for method, hits in rankings.items():
            found[method] += answered([h.position for h in hits], q)
    return {method: 100 * count / len(questions) for method, count in found.items()}


def _recall_figures(model: WordLlamaModel) -> list[Figure]:
    title = "knowledge search recall@5, 200 paraphrased questions over 200 documents"
    pct, hard = _recall(model, hard=False), _recall(model, hard=True)
    return [
        Figure(title, pct["hybrid"], "%", "BM25 alone", pct["lexical"], "≥ 85 %",
               pct["hybrid"] >= 85, note=f"embeddings alone {pct['semantic']:.1f} %"),
        Figure(f"{title}, sections sharing the questions' words", hard["hybrid"], "%",
               "BM25 alone", hard["lexical"],
               note=f"embeddings alone {hard['semantic']:.1f} %: the limit of both"),
    ]  # fmt: skip


def _throughput(model: WordLlamaModel, folder: Path, n: int) -> list[Figure]:
    stores = open_sqlite(folder / "throughput.db")
    try:
        blobs = LocalBlobStore(folder / "blobs")
        settings = KnowledgeSettings()
        embedder = Embedder(lambda: model)
        bases = _bases(stores, blobs, settings, embedder)
        base = bases.create(ORG, KnowledgeBaseCreate(name="towns")).base_id
        docs, _ = corpus(n, seed=SEED + 1)
        for name, text in docs:
            bases.add_document(ORG, base, DocumentAdd(TextDocument(name=name, text=text)))
        indexing = Indexing(stores.knowledge, blobs, settings, embedder)
        started = time.perf_counter()
        done = 0
        while (version := indexing.next()) is not None:
            assert version.status == "ready", version.error
            done += version.chunks
        seconds = time.perf_counter() - started
    finally:
        stores.close()
    rate = done / seconds
    return [
        Figure(f"indexing throughput ({n} documents, {done} passages, SQLite)", rate,
               "passages/s", target="≥ 50 passages/s on 2 cores", met=rate >= 50),
    ]  # fmt: skip


def _search_at_scale(model: WordLlamaModel, folder: Path, size: int) -> list[Figure]:
    """The search as agents get it (every vector read below
    ``partition_from_chunks``), beside the vectors in partitions, interleaved; and how
    many of the exact 10 nearest vectors the partitions still find."""
    stores = open_sqlite(folder / "scale.db")
    try:
        blobs = LocalBlobStore(folder / "scale-blobs")
        settings = KnowledgeSettings(max_chunks_per_base=size + 1)
        embedder = Embedder(lambda: model)
        bases = _bases(stores, blobs, settings, embedder)
        partitioned = settings.model_copy(update={"partition_from_chunks": 20_000})
        exact = _bases(stores, blobs, partitioned, embedder)
        base = bases.create(ORG, KnowledgeBaseCreate(name="scale")).base_id
        docs, questions = corpus(size // 5 + 1, seed=SEED + 2)
        _store_directly(stores.knowledge, model, base, docs, size)
        first = _timed(lambda: bases.search(ORG, base, questions[0].text, 10))
        exact.search(ORG, base, questions[0].text, 10)  # its own index, built apart
        times, baseline = [], []
        for q in questions[1:201]:
            times.append(_timed(partial(bases.search, ORG, base, q.text, 10)))
            baseline.append(_timed(partial(exact.search, ORG, base, q.text, 10)))
        index = BaseIndex(stores.knowledge.chunks(ORG, base), partition_from=20_000)
        found = []
        for q in questions[1:201]:
            vector = np.frombuffer(model.embed([q.text])[0], dtype="<f4")
            nearest = {h.position for h in index.semantic(vector, 10, exact=True)}
            probed = {h.position for h in index.semantic(vector, 10)}
            found.append(len(nearest & probed) / len(nearest))
    finally:
        stores.close()
    p50, p95 = statistics.median(times), percentile(times, 95)
    name = f"search over {size:,} passages (SQLite, hybrid, top 10)"
    chosen = "partitions" if size >= settings.partition_from_chunks else "every vector"
    return [
        Figure(f"{name}, p50", p50, "ms", "vectors in partitions", statistics.median(baseline),
               "≤ 30 ms", p50 <= 30, note=f"as served: {chosen} read"),
        Figure(f"{name}, p95", p95, "ms", "vectors in partitions", percentile(baseline, 95),
               "≤ 80 ms", p95 <= 80),
        Figure("partitions: of the exact 10 nearest vectors, found in those probed",
               100 * statistics.mean(found), "%"),
        Figure("first search of that base (builds its index from the store)", first, "ms"),
    ]  # fmt: skip


def _store_directly(
    store: KnowledgeStore, model: WordLlamaModel, base: str, docs: list[tuple[str, str]], size: int
) -> None:
    """``size`` passages as ready versions of 1,000 passages each (indexing them one
    document at a time is what ``_throughput`` measures; here only the search is)."""
    chunks = [(name, p) for name, text in docs for p in passages(text, 1200, 200)][:size]
    texts = [embedding_text(p) for _, p in chunks]
    vectors = _embed(model, texts)
    for batch, start in enumerate(range(0, len(chunks), 1000)):
        version = ContentVersion(ORG, base, f"cv{batch:016x}", "doc", f"part-{batch}",
                                 "upload", "text/markdown", 0, "", float(batch))  # fmt: skip
        store.add_version(version, 10_000)
        part = [
            KnowledgeChunk(version.version_id, i, p.heading, p.text, p.start, vectors[start + i])
            for i, (_, p) in enumerate(chunks[start : start + 1000])
        ]
        store.finish_version(version.but(status="ready", chunks=len(part)), part, size + 1)


def _embed(model: WordLlamaModel, texts: list[str]) -> list[bytes]:
    vectors: list[bytes] = []
    for start in range(0, len(texts), 512):
        vectors.extend(model.embed(texts[start : start + 512]))
    return vectors


def _bases(
    stores: Stores, blobs: LocalBlobStore, settings: KnowledgeSettings, embedder: Embedder
) -> KnowledgeBases:
    files = ConversationFiles(stores.files, blobs, FileSettings())
    sources = DocumentSources(files, None, settings)
    return KnowledgeBases(stores.knowledge, blobs, sources, settings, embedder)


def _with(chunk: KnowledgeChunk, vector: bytes) -> KnowledgeChunk:
    return replace(chunk, vector=vector)


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> int:
    for f in measure(quick="--quick" in sys.argv):
        baseline = f" ({f.baseline_name}: {f.baseline:.1f})" if f.baseline is not None else ""
        verdict = {True: " met", False: " MISSED", None: ""}[f.met]
        note = f"; {f.note}" if f.note else ""
        print(f"{f.name}: {f.ours:.1f} {f.unit}{baseline} {f.target}{verdict}{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
