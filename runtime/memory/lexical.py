"""Lexical ranking for ``search_memory`` when there are no embeddings: BM25 over the
key's entries (Robertson and Zaragoza's Okapi BM25, k1 = 1.2, b = 0.75), on lowercase
words with a light suffix strip, so "deploys" finds "deploy". No dependency: a key
holds at most a few thousand short entries, scored in one pass."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

K1 = 1.2
B = 0.75
_WORD = re.compile(r"\w+")
_SUFFIXES = ("ing", "ies", "es", "ed", "s")


def terms(text: str) -> list[str]:
    return [_stem(word) for word in _WORD.findall(text.lower())]


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def bm25(query: str, documents: Sequence[str]) -> list[float]:
    """Each document's BM25 score for the query (0: no word in common)."""
    bags = [Counter(terms(document)) for document in documents]
    if not bags:
        return []
    average = sum(sum(bag.values()) for bag in bags) / len(bags) or 1.0
    wanted = set(terms(query))
    holding = {term: sum(1 for bag in bags if term in bag) for term in wanted}
    idf = {
        term: math.log(1 + (len(bags) - n + 0.5) / (n + 0.5)) for term, n in holding.items() if n
    }
    scores = []
    for bag in bags:
        length = sum(bag.values())
        score = 0.0
        for term, weight in idf.items():
            frequency = bag[term]
            if frequency:
                norm = frequency + K1 * (1 - B + B * length / average)
                score += weight * frequency * (K1 + 1) / norm
        scores.append(score)
    return scores
