"""Word n-gram matching against protected n-grams: the exact scalar check, and ``NgramIndex``
to check whole batches at numpy speed with the same verdicts.

Under ``multilingual`` a protected n-gram lighter than a window is a text protected as a whole
(``core._windows``, ``weighted-3``): ``Anchors`` finds it in a text by its anchor, the window of
``anchor_weight(n)`` starting it, then compares the whole run of its words."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Set
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from neardup.core._fnv import fnv1a64_spans
from neardup.core._grambuf import ByteKeys, GramBuffer
from neardup.core._text import check_tokenizer, words
from neardup.core._tokens import Tokens, shingle_spans
from neardup.core._windows import (
    WEIGHT_UNIT,
    anchor_weight,
    buffer_weights,
    text_grams,
    window_ends,
    windows,
    word_weights,
)
from neardup.core.errors import ParameterError

__all__ = [
    "Anchors",
    "NgramIndex",
    "charged_words",
    "check_n",
    "contaminated",
    "first_shared_ngram",
    "gram_hashes",
    "gram_spans",
    "shared_grams",
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
    ``core._windows``: under ``multilingual`` a window is ``n`` English words' worth, and a
    gram lighter than a window is a whole item, found where its anchor starts). Under
    ``multilingual`` every gram is weighed first (``NgramIndex`` does it once for many texts)."""
    anchors = Anchors.of(grams, n, tokenizer)
    return next(shared_grams(words(text, tokenizer), grams, n, tokenizer, anchors), None)


def gram_spans(
    w: list[str], grams: Set[str], n: int, tokenizer: str = "words"
) -> list[tuple[int, int]]:
    """``[lo, hi)`` of every run of the words ``w`` that is one of ``grams``: its windows, and
    under ``multilingual`` the whole items (the grams are weighed first: meant for a few, such
    as the ones a text shares), in order.

    >>> gram_spans(["x", "a", "b", "y"], {"a b"}, 2)
    [(1, 3)]
    """
    found = [(lo, hi) for lo, hi in windows(w, n, tokenizer) if " ".join(w[lo:hi]) in grams]
    found += [(lo, hi) for lo, hi, _ in Anchors.of(grams, n, tokenizer).spans(w)]
    return sorted(found)


def shared_grams(
    w: list[str], grams: Set[str], n: int, tokenizer: str, anchors: Anchors | None = None
) -> Iterator[str]:
    """Every n-gram of the words ``w`` in ``grams``, by where it starts: the window starting at
    a word, then the whole items (``anchors``) starting there. Lazy under ``words``."""
    if tokenizer == "words" or anchors is None or not anchors.by_anchor:
        return (g for g in text_grams(w, n, tokenizer) if g in grams)
    return _shared_weighted(w, grams, n, anchors)


def _shared_weighted(w: list[str], grams: Set[str], n: int, anchors: Anchors) -> Iterator[str]:
    weights = word_weights(w) if w else np.zeros(0, dtype=np.int64)
    ends = window_ends(weights, np.array([len(w)], dtype=np.int64), n).tolist()
    wholes = anchors.spans(w, weights)
    for i, end in enumerate(ends):
        if end >= 0:
            gram = " ".join(w[i:end])
            if gram in grams:
                yield gram
        while wholes and wholes[0][0] == i:
            yield wholes.pop(0)[2]


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


#: Slots of the filter of anchors' leading bytes (a multiplicative hash of them picks one).
_KEY_SLOTS_BITS = 16
_KEY_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class Anchors:
    """The whole items among protected n-grams (those lighter than a window, ``multilingual``
    only), by anchor: ``by_anchor[anchor]`` lists (words, whole n-gram) for the exact check;
    the hashes (sorted by anchor hash) find candidates in a batch at numpy speed, looked up only
    at the words whose first ``key_bytes`` (up to 16) bytes begin an anchor (``keys``, sorted;
    ``key_slots``: a table of their first eight bytes' hashes)."""

    need: int
    by_anchor: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    anchor_hashes: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))
    sizes: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    whole_hashes: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))
    key_bytes: int = 16
    keys: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))
    key_slots: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, np.bool_))

    @classmethod
    def of(
        cls,
        grams: Iterable[str],
        n: int,
        tokenizer: str,
        light: Iterable[str] | None = None,
        buffer: GramBuffer | None = None,
    ) -> Anchors:
        """The anchors of the grams lighter than a window (none under ``words``); ``light``:
        those grams, when known (a protected set knows its whole items), else every gram is
        weighed to find them, all at once (``buffer``: the grams' ``GramBuffer``, when already
        in hand)."""
        found = cls(anchor_weight(n))
        if tokenizer == "words":
            return found
        if light is None:
            spans = GramBuffer.of(list(grams)) if buffer is None else buffer
        else:
            spans = GramBuffer.of(sorted(light))
        if not spans.grams:
            return found
        word_end, total, first = spans.weighed()
        past = np.append(first[1:], len(total) - 1)  # one past each gram's last word
        which = np.arange(len(first), dtype=np.int64)
        if light is None:
            which = np.flatnonzero(total.take(past) - total.take(first) < n * WEIGHT_UNIT)
        # The first end whose words from the gram's first weigh ``need``; a gram lighter than
        # its anchor matches nothing.
        ends = np.searchsorted(total, total.take(first[which]) + found.need, side="left")
        held = ends <= past[which]
        which, ends = which[held], ends[held]
        if len(which):
            found._add(spans, which, word_end.take(ends - 1), past[which] - first[which])
        return found

    def _add(
        self,
        spans: GramBuffer,
        which: NDArray[np.int64],
        anchor_end: NDArray[np.int64],
        sizes: NDArray[np.int64],
    ) -> None:
        """Hold the grams ``spans.grams[which]`` (in that order), their anchors ending at
        ``anchor_end`` in ``spans.buf``, of ``sizes`` words each."""
        start = spans.start[which]
        raw = spans.buf.tobytes()
        anchors = [
            raw[s:e].decode("utf-8")
            for s, e in zip(start.tolist(), anchor_end.tolist(), strict=True)
        ]
        grams = [spans.grams[i] for i in which.tolist()]
        for anchor, size, gram in zip(anchors, sizes.tolist(), grams, strict=True):
            self.by_anchor.setdefault(anchor, []).append((size, gram))
        hashes = fnv1a64_spans(spans.buf, start, anchor_end)
        order = np.argsort(hashes, kind="stable")
        self.anchor_hashes = hashes[order]
        self.sizes = sizes[order]
        self.whole_hashes = fnv1a64_spans(spans.buf, start, spans.end[which])[order]
        self.key_bytes = min(16, int((anchor_end - start).min()))
        keys = ByteKeys(spans.buf)
        self.keys = np.unique(keys.key(start, self.key_bytes))
        self.key_slots = np.zeros(1 << _KEY_SLOTS_BITS, dtype=np.bool_)
        self.key_slots[_slot(keys.key(start, min(8, self.key_bytes)))] = True

    def starts(self, buf: NDArray[np.uint8], word_start: NDArray[np.int64]) -> NDArray[np.int64]:
        """The words (indices into ``word_start``) whose first ``key_bytes`` bytes are an
        anchor's: every word an anchor can start at (a filter: the hashes then decide). The
        first eight bytes of every word pick a slot of ``key_slots``; the few words of an
        anchor's slot are keyed whole and looked up in ``keys``."""
        if not len(self.keys):
            return np.zeros(0, dtype=np.int64)
        keys = ByteKeys(buf)
        first = keys.key(word_start, min(8, self.key_bytes))
        maybe = np.flatnonzero(self.key_slots.take(_slot(first)))
        found = keys.key(word_start[maybe], self.key_bytes)
        at = np.minimum(np.searchsorted(self.keys, found), len(self.keys) - 1)
        return np.asarray(maybe[self.keys[at] == found], dtype=np.int64)

    def spans(
        self, w: Sequence[str], weights: NDArray[np.int64] | None = None
    ) -> list[tuple[int, int, str]]:
        """``(lo, hi, whole n-gram)`` of every whole item the words ``w`` hold, in order (the
        exact check: an anchor's words, then all the item's)."""
        if not self.by_anchor or not w:
            return []
        weights = word_weights(w) if weights is None else weights
        ends = window_ends(weights, np.array([len(w)], dtype=np.int64), 1, self.need)
        out = []
        for i in np.flatnonzero(ends >= 0).tolist():
            for size, whole in self.by_anchor.get(" ".join(w[i : ends[i]]), ()):
                if i + size <= len(w) and " ".join(w[i : i + size]) == whole:
                    out.append((i, i + size, whole))
        return out

    def documents(
        self, tokens: Tokens, n: int, weights: NDArray[np.int64] | None = None
    ) -> NDArray[np.int64]:
        """The documents of a batch holding a whole item's hash at one of its anchors' (a hash
        filter: the exact check confirms); ``weights``: its words', when already in hand.
        Anchors are weighed and hashed only at the words whose leading bytes begin one."""
        if not len(self.anchor_hashes) or not len(tokens.word_start):
            return np.zeros(0, dtype=np.int64)
        at = self.starts(tokens.buf, tokens.word_start)
        if weights is None:
            weights = buffer_weights(tokens.buf, tokens.word_start, tokens.word_end)
        total = np.zeros(len(weights) + 1, dtype=np.int64)
        np.cumsum(weights, out=total[1:])
        bounds = np.cumsum(tokens.doc_words)  # one past each document's last word
        doc = np.searchsorted(bounds, at, side="right")
        ends = np.searchsorted(total, total.take(at) + self.need, side="left")
        held = ends <= bounds.take(doc)
        at, ends, doc = at[held], ends[held], doc[held]
        hashes = fnv1a64_spans(tokens.buf, tokens.word_start.take(at), tokens.word_end[ends - 1])
        lo = np.searchsorted(self.anchor_hashes, hashes, side="left")
        many = np.searchsorted(self.anchor_hashes, hashes, side="right") - lo
        hit = np.repeat(np.arange(len(at)), many)
        which = np.arange(int(many.sum())) - np.repeat(np.cumsum(many) - many, many)
        which += np.repeat(lo, many)
        where = at[hit]
        last = where + self.sizes[which] - 1
        inside = last < bounds.take(doc[hit])
        hit, which, where, last = hit[inside], which[inside], where[inside], last[inside]
        whole = fnv1a64_spans(tokens.buf, tokens.word_start[where], tokens.word_end[last])
        return np.asarray(doc[hit[whole == self.whole_hashes[which]]], dtype=np.int64)


def _slot(keys: NDArray[np.uint64]) -> NDArray[np.int64]:
    """The slot of ``Anchors.key_slots`` of every key: its top bits after a multiplicative hash."""
    return np.asarray((keys * _KEY_MIX) >> np.uint64(64 - _KEY_SLOTS_BITS), dtype=np.int64)


class NgramIndex:
    """Protected n-grams plus their sorted FNV-1a 64 hashes, to check whole batches at once.

    ``contaminated_many`` hashes every n-gram of a batch with the signature kernel's tokeniser
    and FNV, keeps the documents with a hash in the set (an identical n-gram always has the
    identical hash), and confirms each of those with the exact ``contaminated``: the verdicts are
    exactly ``contaminated``'s, at numpy speed for the clean majority.
    """

    def __init__(
        self,
        grams: Set[str],
        n: int = 13,
        tokenizer: str = "words",
        wholes: Iterable[str] | None = None,
    ) -> None:
        check_n(n)
        check_tokenizer(tokenizer)
        self.grams = grams
        self.n = n
        self.tokenizer = tokenizer
        spans = GramBuffer.of(list(grams))  # encoded once: hashed, and weighed if need be
        self.hashes = np.sort(spans.hashes())
        # ``wholes``: the grams protected as a whole, when the caller knows them (else weighed)
        self.anchors = Anchors.of(grams, n, tokenizer, wholes, spans)

    def first_shared(self, text: str) -> str | None:
        """``first_shared_ngram(text, grams, n, tokenizer)``, the whole items weighed once."""
        w = words(text, self.tokenizer)
        return next(shared_grams(w, self.grams, self.n, self.tokenizer, self.anchors), None)

    def contaminated(self, text: str) -> bool:
        """``contaminated(text, grams, n, tokenizer)``, the whole items weighed once."""
        return self.first_shared(text) is not None

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
        weights = None
        if self.tokenizer != "words":
            weights = buffer_weights(tokens.buf, tokens.word_start, tokens.word_end)
        start, end, doc = window_spans(tokens, self.n, self.tokenizer, weights)
        found = self.contains(fnv1a64_spans(tokens.buf, start, end))
        wholes = self.anchors.documents(tokens, self.n, weights)
        flagged = np.concatenate((doc[found], wholes))
        for i in np.unique(flagged).tolist():
            out[i] = self.contaminated(texts[i])
        return out


def window_spans(
    tokens: Tokens, n: int, tokenizer: str = "words", weights: NDArray[np.int64] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Byte spans ``[start, end)`` in ``tokens.buf`` of every window of the batch (its words
    joined by single spaces, as ``text_grams`` joins them), and the document of each;
    ``weights``: its words' (``buffer_weights``), when already in hand."""
    if tokenizer == "words":
        start, end, per_doc = shingle_spans(tokens, n)
        # A text of 1 to n-1 words has one "shingle" of all its words, but no n-gram.
        whole = np.repeat(tokens.doc_words >= n, per_doc)
        doc = np.repeat(np.arange(len(tokens.doc_words)), per_doc)
        return start[whole], end[whole], doc[whole]
    if weights is None:
        weights = buffer_weights(tokens.buf, tokens.word_start, tokens.word_end)
    ends = window_ends(weights, tokens.doc_words, n)
    found = np.flatnonzero(ends >= 0)
    doc = np.repeat(np.arange(len(tokens.doc_words)), tokens.doc_words)
    return tokens.word_start[found], tokens.word_end[ends[found] - 1], doc[found]
