"""Decontamination against protected eval sets by word n-grams (CORE.md section 5)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence, Set
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from core.errors import CorpusError, ParameterError
from core.fnv import fnv1a64_spans
from core.stages import Doc
from core.text import ngrams, words
from core.tokens import Tokens, shingle_spans

__all__ = [
    "NON_TEXT_KEYS",
    "NgramIndex",
    "contaminated",
    "decontaminate",
    "first_shared_ngram",
    "item_label",
    "item_strings",
    "jsonl_items",
    "protected_ngrams",
    "protected_texts",
]

#: Keys whose values are labels, not text a model is tested on: never protected.
NON_TEXT_KEYS = frozenset({"case_id", "id", "tags", "scorer_args"})


def item_strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, nested ones included, except under NON_TEXT_KEYS."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in NON_TEXT_KEYS:
                yield from item_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from item_strings(item)


def item_label(item: dict[str, Any], line: int) -> str:
    """How a protected item is named in reports: its ``id``, else ``case_id``, else its line."""
    for key in ("id", "case_id"):
        value = item.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return str(line)


def jsonl_items(lines: Iterable[str], path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line; CorpusError naming a bad line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(path, number, f"not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise CorpusError(path, number, f"expected a JSON object, got {type(item).__name__}")
        yield number, item


def protected_texts(path: str | PathLike[str]) -> Iterator[str]:
    """The protected texts of one file: string values of a ``.jsonl``, else the whole file."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as fh:
            if p.suffix.lower() != ".jsonl":
                yield fh.read()
                return
            for _, item in jsonl_items(fh, str(path)):
                yield from item_strings(item)
    except UnicodeDecodeError as exc:
        raise CorpusError(str(path), None, f"not UTF-8 ({exc.reason})") from None


def protected_ngrams(paths: Iterable[str | PathLike[str]], n: int = 13) -> set[str]:
    """The word n-grams (words joined by one space) of protected eval or validation files.

    ``.jsonl``: every string value of every object, nested ones included, except under the keys
    ``case_id``, ``id``, ``tags``, ``scorer_args``; a line that is not a JSON object raises
    CorpusError with its line number. Any other file is one protected text. A text of fewer
    than ``n`` words contributes nothing.
    """
    _check_n(n)
    grams: set[str] = set()
    for path in paths:
        for text in protected_texts(path):
            grams.update(ngrams(words(text), n))
    return grams


def _check_n(n: int) -> None:
    if n < 1:
        raise ParameterError(f"n (words per n-gram) must be at least 1, got {n}")


def first_shared_ngram(text: str, grams: Set[str], n: int = 13) -> str | None:
    """The first word n-gram of ``text`` that is in ``grams`` (every window, the last included)."""
    for gram in ngrams(words(text), n):
        if gram in grams:
            return gram
    return None


def contaminated(text: str, grams: Set[str], n: int = 13) -> bool:
    """Whether any word n-gram of ``text`` is in ``grams``; case and punctuation never matter.

    >>> grams = protected_ngrams_of("Tom found a shiny red shell by the river and carried it "
    ...                             "home to show his sister.")
    >>> contaminated("and then TOM FOUND A SHINY, RED shell by the river and carried it "
    ...              "home to show", grams)
    True
    """
    return first_shared_ngram(text, grams, n) is not None


def protected_ngrams_of(text: str, n: int = 13) -> set[str]:
    """The n-grams of one protected text (for examples and tests)."""
    return set(ngrams(words(text), n))


def decontaminate(docs: Iterable[Doc], protected: Set[str], n: int = 13) -> Iterator[Doc]:
    """Drop every document sharing a word n-gram with ``protected`` (from ``protected_ngrams``).

    Streams: reads one document at a time and yields it before reading the next, so it works on
    an endless input.
    """
    _check_n(n)
    for doc in docs:
        if not contaminated(doc.text, protected, n):
            yield doc


class NgramIndex:
    """Protected n-grams plus their sorted FNV-1a 64 hashes, to check whole batches at once.

    ``contaminated_many`` hashes every n-gram of a batch with the signature kernel's tokeniser
    and FNV, keeps the documents with a hash in the set (an identical n-gram always has the
    identical hash), and confirms each of those with the exact ``contaminated``: the verdicts are
    exactly ``contaminated``'s, at numpy speed for the clean majority.
    """

    def __init__(self, grams: Set[str], n: int = 13) -> None:
        _check_n(n)
        self.grams = grams
        self.n = n
        encoded = [g.encode("utf-8") for g in grams]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        end = np.cumsum(lengths)
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self.hashes = np.sort(fnv1a64_spans(buf, end - lengths, end))

    def contaminated_many(self, texts: Sequence[str]) -> NDArray[np.bool_]:
        """``contaminated(text, grams, n)`` for every text of the batch."""
        out = np.zeros(len(texts), dtype=np.bool_)
        if not texts or not len(self.hashes):
            return out
        tokens = Tokens(texts)
        start, end, per_doc = shingle_spans(tokens, self.n)
        # A text of 1 to n-1 words has one "shingle" of all its words, but no n-gram.
        whole = np.repeat(tokens.doc_words >= self.n, per_doc)
        found = np.isin(fnv1a64_spans(tokens.buf, start, end), self.hashes) & whole
        doc = np.repeat(np.arange(len(texts)), per_doc)
        for i in np.unique(doc[found]).tolist():
            out[i] = contaminated(texts[i], self.grams, self.n)
        return out
