"""Word n-gram matching against protected n-grams: the exact scalar check, and ``NgramIndex``
to check whole batches at numpy speed with the same verdicts."""

from __future__ import annotations

from collections.abc import Sequence, Set

import numpy as np
from numpy.typing import NDArray

from neardup.core._fnv import fnv1a64_spans
from neardup.core._text import check_tokenizer, words
from neardup.core._tokens import Tokens, shingle_spans
from neardup.core._windows import buffer_weights, text_grams, window_ends
from neardup.core.errors import ParameterError

__all__ = [
    "NgramIndex",
    "charged_words",
    "check_n",
    "contaminated",
    "first_shared_ngram",
    "gram_hashes",
    "window_spans",
]


def check_n(n: int) -> None:
    """ParameterError unless ``n`` (words per n-gram) is a whole number >= 1."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"n (words per n-gram) must be a whole number >= 1, got {n!r}")


def charged_words(texts: Sequence[str], n: int = 13, tokenizer: str = "words") -> NDArray[np.int64]:
    """What a contamination check of each text is charged: its words by ``tokenizer``, and at
    least ``n`` (one whole n-gram window), so that a verdict, which a text of ``n`` words
    already gets, never costs less than ``n`` words. Tokenised as a whole batch, at numpy
    speed.

    >>> charged_words(["one two three", " ".join(["w"] * 20)], n=13).tolist()
    [13, 20]
    """
    check_n(n)
    check_tokenizer(tokenizer)
    if not len(texts):
        return np.zeros(0, dtype=np.int64)
    return np.maximum(Tokens(texts, tokenizer=tokenizer).doc_words.astype(np.int64), n)


def first_shared_ngram(
    text: str, grams: Set[str], n: int = 13, tokenizer: str = "words"
) -> str | None:
    """The first word n-gram of ``text`` that is in ``grams`` (every window, the last included;
    ``core._windows``: under ``multilingual`` a window is ``n`` English words' worth)."""
    for gram in text_grams(words(text, tokenizer), n, tokenizer):
        if gram in grams:
            return gram
    return None


def contaminated(text: str, grams: Set[str], n: int = 13, tokenizer: str = "words") -> bool:
    """Whether any word n-gram of ``text`` (its words by ``tokenizer``) is in ``grams``; case
    and punctuation never matter. Under ``multilingual`` an n-gram is a window of ``n`` English
    words' worth of words weighed by script (``core._windows``).

    >>> grams = set(text_grams(words("Tom found a shiny red shell by the river and carried "
    ...                              "it home to show his sister."), 13))
    >>> contaminated("and then TOM FOUND A SHINY, RED shell by the river and carried it "
    ...              "home to show", grams)
    True
    """
    return first_shared_ngram(text, grams, n, tokenizer) is not None


def gram_hashes(grams: Sequence[str]) -> NDArray[np.uint64]:
    """FNV-1a 64 of every n-gram's UTF-8 bytes, as ``NgramIndex`` hashes them."""
    encoded = [g.encode("utf-8") for g in grams]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    end = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return fnv1a64_spans(buf, end - lengths, end)


class NgramIndex:
    """Protected n-grams plus their sorted FNV-1a 64 hashes, to check whole batches at once.

    ``contaminated_many`` hashes every n-gram of a batch with the signature kernel's tokeniser
    and FNV, keeps the documents with a hash in the set (an identical n-gram always has the
    identical hash), and confirms each of those with the exact ``contaminated``: the verdicts are
    exactly ``contaminated``'s, at numpy speed for the clean majority.
    """

    def __init__(self, grams: Set[str], n: int = 13, tokenizer: str = "words") -> None:
        check_n(n)
        check_tokenizer(tokenizer)
        self.grams = grams
        self.n = n
        self.tokenizer = tokenizer
        self.hashes = np.sort(gram_hashes(list(grams)))

    def contains(self, hashes: NDArray[np.uint64]) -> NDArray[np.bool_]:
        """Whether each hash is a protected n-gram's: a binary search in the sorted hashes, so
        the cost follows the text, never the set (``np.isin`` would sort the set every call)."""
        if not len(self.hashes):
            return np.zeros(len(hashes), dtype=np.bool_)
        at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        return np.asarray(self.hashes[at] == hashes)

    def contaminated_many(self, texts: Sequence[str]) -> NDArray[np.bool_]:
        """``contaminated(text, grams, n)`` for every text of the batch."""
        out = np.zeros(len(texts), dtype=np.bool_)
        if not texts or not len(self.hashes):
            return out
        tokens = Tokens(texts, tokenizer=self.tokenizer)
        start, end, doc = window_spans(tokens, self.n, self.tokenizer)
        found = self.contains(fnv1a64_spans(tokens.buf, start, end))
        for i in np.unique(doc[found]).tolist():
            out[i] = contaminated(texts[i], self.grams, self.n, self.tokenizer)
        return out


def window_spans(
    tokens: Tokens, n: int, tokenizer: str = "words"
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Byte spans ``[start, end)`` in ``tokens.buf`` of every window of the batch (its words
    joined by single spaces, as ``text_grams`` joins them), and the document of each."""
    if tokenizer == "words":
        start, end, per_doc = shingle_spans(tokens, n)
        # A text of 1 to n-1 words has one "shingle" of all its words, but no n-gram.
        whole = np.repeat(tokens.doc_words >= n, per_doc)
        doc = np.repeat(np.arange(len(tokens.doc_words)), per_doc)
        return start[whole], end[whole], doc[whole]
    weights = buffer_weights(tokens.buf, tokens.word_start, tokens.word_end)
    ends = window_ends(weights, tokens.doc_words, n)
    found = np.flatnonzero(ends >= 0)
    doc = np.repeat(np.arange(len(tokens.doc_words)), tokens.doc_words)
    return tokens.word_start[found], tokens.word_end[ends[found] - 1], doc[found]
