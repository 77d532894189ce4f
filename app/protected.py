"""Protected eval sets in memory: every word n-gram, and the items it comes from.

Parsed exactly as ``core.minhash.protected_ngrams`` (id-like keys are labels, not text). The
contents are never returned: only names, counts and the n-gram a checked text already contains.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from core.decont import NgramIndex, item_label, item_strings, jsonl_items
from core.errors import CorpusError
from core.text import ngrams, words

__all__ = ["SET_NAME", "ProtectedSet", "parse_protected_set"]

#: Valid set names: 1 to 128 of [A-Za-z0-9._-].
SET_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


@dataclass
class ProtectedSet:
    """One protected set: n-gram -> the labels of the items containing it (first seen first),
    and the n-grams' hashes to find the contaminated texts of a batch at numpy speed."""

    name: str
    items: int
    grams: dict[str, list[str]]
    n: int
    index: NgramIndex = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = NgramIndex(self.grams.keys(), self.n)

    def hits_many(self, texts: Sequence[str]) -> list[list[tuple[str, str]]]:
        """For every text, (item, first shared n-gram) of the items it shares an n-gram with;
        only the texts the hash filter flags are scanned word by word."""
        out: list[list[tuple[str, str]]] = [[] for _ in texts]
        for i in np.flatnonzero(self.index.contaminated_many(texts)).tolist():
            out[i] = self.hits(words(texts[i]), self.n)
        return out

    @property
    def ngrams(self) -> int:
        """How many distinct n-grams the set protects."""
        return len(self.grams)

    def hits(self, text_words: list[str], n: int) -> list[tuple[str, str]]:
        """(item, first shared n-gram) for every item sharing an n-gram with the text."""
        found: dict[str, str] = {}
        for gram in ngrams(text_words, n):
            for item in self.grams.get(gram, ()):
                found.setdefault(item, gram)
        return list(found.items())


def parse_protected_set(name: str, body: str, *, jsonl: bool, n: int) -> ProtectedSet:
    """Parse an uploaded file; CorpusError (naming the set and line) for a bad JSONL line."""
    grams: dict[str, list[str]] = {}
    if jsonl:
        parsed = list(jsonl_items(body.splitlines(), name))
        items = len(parsed)
        for line, item in parsed:
            label = item_label(item, line)
            for text in item_strings(item):
                _add(grams, text, label, n)
    else:
        items = 1
        _add(grams, body, "1", n)
    if items == 0:
        raise CorpusError(name, None, "the protected set has no items")
    return ProtectedSet(name, items, grams, n)


def _add(grams: dict[str, list[str]], text: str, label: str, n: int) -> None:
    for gram in ngrams(words(text), n):
        labels = grams.setdefault(gram, [])
        # Usually the label is the last one added: skip the scan of the list then.
        if (not labels or labels[-1] != label) and label not in labels:
            labels.append(label)
